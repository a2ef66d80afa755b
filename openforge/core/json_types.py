"""JSON as a type: what request bodies, records' metadata, reports and configuration mappings hold.

`JSONValue` is any value `json.loads` can return; `JSONObject` a JSON object. Use them at seams between rooms
instead of `Any`, so that a reader (and mypy) knows the value is plain data.
"""

from __future__ import annotations

from typing import TypeAlias

JSONScalar: TypeAlias = str | int | float | bool | None
JSONValue: TypeAlias = "JSONScalar | list[JSONValue] | dict[str, JSONValue]"
JSONObject: TypeAlias = dict[str, JSONValue]

__all__ = ["JSONObject", "JSONScalar", "JSONValue"]
