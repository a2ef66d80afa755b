"""How each model family writes a tool call in its sampled text: the markup around one call and how to read
what is inside. The output parser (`output_parser.py`) finds the markup as the text streams in and hands
each complete call to its format; a new family is one more entry in `TOOL_CALL_FORMATS`.

- `json` (the tiny model, Qwen2.5, Qwen3, Hermes): `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`
- `qwen3_coder`: `<tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>`
  (a JSON body inside the same tags is read as `json`)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from openforge.core import ToolSpec


class ToolCallFormat(Protocol):
    """One family's tool-call markup. `close` None: a call runs to the end of the output (formats whose
    calls have no closing tag)."""

    name: str
    open: str
    close: str | None

    def parse(self, body: str, tools: list[ToolSpec] | None) -> tuple[str, dict[str, Any]]:
        """(tool name, arguments) of the text between `open` and `close`; ValueError saying what is wrong."""
        ...


@dataclass(frozen=True)
class JsonToolCalls:
    name: str = "json"
    open: str = "<tool_call>"
    close: str | None = "</tool_call>"

    def parse(self, body: str, tools: list[ToolSpec] | None) -> tuple[str, dict[str, Any]]:
        try:
            payload = json.loads(body)
        except json.JSONDecodeError as e:
            raise ValueError(f"tool call is not valid JSON: {e.msg} at {e.pos}") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            raise ValueError('tool call JSON needs a string "name"')
        arguments = payload.get("arguments", {})
        if isinstance(arguments, str):  # some models encode the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                raise ValueError("tool call arguments are a string that is not JSON") from None
        if not isinstance(arguments, dict):
            raise ValueError("tool call arguments must be a JSON object")
        return payload["name"], arguments


_FUNCTION = re.compile(r"^\s*<function=([^>\n]+)>(.*?)</function>\s*$", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.DOTALL)


@dataclass(frozen=True)
class Qwen3CoderToolCalls:
    name: str = "qwen3_coder"
    open: str = "<tool_call>"
    close: str | None = "</tool_call>"

    def parse(self, body: str, tools: list[ToolSpec] | None) -> tuple[str, dict[str, Any]]:
        if "<function=" not in body:
            return JsonToolCalls().parse(body, tools)
        match = _FUNCTION.match(body.strip())
        if not match:
            raise ValueError("malformed <function=...> block")
        name = match.group(1).strip()
        schema = next((t.parameters for t in tools or [] if t.name == name), {})
        properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
        arguments: dict[str, Any] = {}
        for param, raw in _PARAMETER.findall(match.group(2)):
            param = param.strip()
            arguments[param] = _typed_value(raw, properties.get(param, {}))
        return name, arguments


def _typed_value(raw: str, schema: dict[str, Any]) -> Any:
    """Parameters arrive as text; convert to the schema's type where it is not a string."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind in (None, "string") or (isinstance(kind, list) and "string" in kind):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


TOOL_CALL_FORMATS: dict[str, ToolCallFormat] = {f.name: f for f in (JsonToolCalls(), Qwen3CoderToolCalls())}


def tool_call_format(name: str) -> ToolCallFormat:
    try:
        return TOOL_CALL_FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown tool-call format {name!r}; known: {sorted(TOOL_CALL_FORMATS)}") from None
