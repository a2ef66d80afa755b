"""Reading request bodies safely and writing SSE: the parts every dialect shares.

Everything a harness sends is hostile until checked: bytes that are not UTF-8, JSON that is not JSON or
nests 100,000 levels deep, a string where a list belongs. Each check here raises a 400 `DialectError`
whose message names the field (`messages[3].content[1].tool_use_id: ...`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import ValidationError

from openforge.core import SamplingParams
from openforge.dialects.errors import DialectError

# Deeper than this, tool arguments, schemas and response formats are refused: renderers walk them
# recursively, and a 900-level argument object would otherwise fail there as a 500.
MAX_VALUE_DEPTH = 100

_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def bad(param: str, problem: str) -> DialectError:
    """A 400 naming the field at fault."""
    return DialectError.invalid(f"{param}: {problem}" if param else problem, param or None)


# JSON's names for Python's types; bool before int, since a bool is an int.
_JSON_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


def at(path: str, key: str | int) -> str:
    """The path of a child field: `messages` + 3 → `messages[3]`, `messages[3]` + `role` → `messages[3].role`."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


# ---- bytes → JSON object ------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_body(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying what is wrong with it."""
    if isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    if not isinstance(body, bytes):
        raise TypeError(f"request body must be bytes, got {type(body).__name__}")
    if not body.strip():
        raise bad("", "request body is empty: expected a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad("", f"request body is not valid UTF-8 (invalid byte at offset {e.start})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        # The C scanner recurses once per level; 100k `[` would otherwise take the worker down.
        raise bad("", "request body nests JSON too deeply") from None
    except json.JSONDecodeError as e:
        raise bad("", f"request body is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except ValueError as e:
        raise bad("", f"request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise bad("", f"request body must be a JSON object, got {type_name(data)}")
    if _ESCAPED_SURROGATE.search(body):
        data = _replace_lone_surrogates(data)
    return data


def _clean(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def _replace_lone_surrogates(data: dict[str, Any]) -> dict[str, Any]:
    """JSON may escape half a surrogate pair (`"\\ud800"`); such a string cannot be encoded as UTF-8 by
    the tokenizer or the store, so it becomes U+FFFD. Iterative: the input may be deep."""
    stack: list[Any] = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in list(node):
                value = node[key]
                clean_key = _clean(key)
                if clean_key != key:
                    del node[key]
                    node[clean_key] = value
                if isinstance(value, str):
                    node[clean_key] = _clean(value)
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                if isinstance(value, str):
                    node[i] = _clean(value)
                elif isinstance(value, (dict, list)):
                    stack.append(value)
    return data


def check_depth(value: Any, param: str, limit: int = MAX_VALUE_DEPTH) -> None:
    """Refuse a JSON value nested deeper than `limit` levels (iteratively: the value may be deep)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise bad(param, f"nests deeper than {limit} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))


def parse_arguments(text: str, param: str) -> dict[str, Any]:
    """Tool-call arguments sent as a JSON string (OpenAI dialects) → the canonical object."""
    if not text.strip():
        return {}  # models emit "" for a call without arguments
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise bad(param, "arguments nest JSON too deeply") from None
    except ValueError as e:
        raise bad(param, f"arguments are not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise bad(param, f"arguments must be a JSON object, got {type_name(value)}")
    check_depth(value, param)
    return value


# ---- typed field reads (null counts as absent for optional fields) ------------------------------------


def need_object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise bad(param, f"expected an object, got {type_name(value)}")
    return value


def req_str(obj: dict, key: str, path: str, *, nonempty: bool = False) -> str:
    param = at(path, key)
    value = obj.get(key)
    if value is None:
        raise bad(param, "is required")
    if not isinstance(value, str):
        raise bad(param, f"expected a string, got {type_name(value)}")
    if nonempty and not value:
        raise bad(param, "must not be empty")
    return value


def opt_str(obj: dict, key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise bad(at(path, key), f"expected a string, got {type_name(value)}")
    return value


def opt_bool(obj: dict, key: str, path: str, default: bool = False) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad(at(path, key), f"expected true or false, got {type_name(value)}")
    return value


def opt_int(obj: dict, key: str, path: str, *, minimum: int | None = None) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # some clients serialise every number as a float
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(at(path, key), f"expected an integer, got {type_name(value)}")
    if minimum is not None and value < minimum:
        raise bad(at(path, key), f"must be at least {minimum}, got {value}")
    return value


def opt_number(
    obj: dict, key: str, path: str, *, minimum: float | None = None, maximum: float | None = None
) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad(at(path, key), f"expected a number, got {type_name(value)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise bad(at(path, key), f"must be between {minimum} and {maximum}, got {value}")
    return float(value)


def opt_choice(obj: dict, key: str, path: str, allowed: tuple[str, ...]) -> str | None:
    """An optional string that must be one of `allowed` (an API's documented values)."""
    value = opt_str(obj, key, path)
    if value is not None and value not in allowed:
        raise bad(at(path, key), f"must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")
    return value


def req_list(obj: dict, key: str, path: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        raise bad(at(path, key), "is required")
    if not isinstance(value, list):
        raise bad(at(path, key), f"expected an array, got {type_name(value)}")
    return value


def opt_list(obj: dict, key: str, path: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad(at(path, key), f"expected an array, got {type_name(value)}")
    return value


def each_object(obj: dict, key: str, path: str = "") -> Iterator[tuple[dict[str, Any], str]]:
    """The objects of an optional array field, each with its path (`tools[2]`); any other element is a 400."""
    items_path = at(path, key)
    for i, item in enumerate(opt_list(obj, key, path)):
        yield need_object(item, at(items_path, i)), at(items_path, i)


def opt_object(obj: dict, key: str, path: str) -> dict[str, Any] | None:
    value = obj.get(key)
    if value is None:
        return None
    return need_object(value, at(path, key))


def str_list(value: Any, param: str) -> list[str]:
    """A stop list: one string or an array of non-empty strings."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise bad(param, f"expected a string or an array of strings, got {type_name(value)}")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise bad(at(param, i) if isinstance(value, list) else param, f"expected a string, got {type_name(item)}")
        if not item:
            raise bad(at(param, i) if isinstance(value, list) else param, "stop sequences must not be empty")
    return list(items)


def sampling_params(
    *,
    max_tokens: int | None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    stop: list[str] | None = None,
    seed: int | None = None,
    names: dict[str, str] | None = None,
) -> SamplingParams:
    """Canonical sampling parameters from what the request set (the rest keep their defaults).

    `names` maps canonical names to the wire's, so a range error names the field the harness sent.
    """
    names = names or {}
    given: dict[str, Any] = {}
    if max_tokens is not None:
        given["max_tokens"] = max_tokens
    if temperature is not None:
        given["temperature"] = temperature
    if top_p is not None:
        # 0 is legal on the wire and means "only the most likely token"; canonically top_p must be > 0.
        given["top_p"] = top_p if top_p > 0 else 1e-9
    if top_k is not None:
        given["top_k"] = top_k
    if stop:
        given["stop"] = stop
    if seed is not None:
        given["seed"] = seed
    try:
        return SamplingParams(**given)
    except ValueError as e:  # pydantic's ValidationError is a ValueError
        errors = e.errors() if isinstance(e, ValidationError) else []
        field = str(errors[0]["loc"][0]) if errors else ""
        message = errors[0]["msg"] if errors else str(e)
        raise bad(names.get(field, field), message) from None


# ---- writing ------------------------------------------------------------------------------------------


def sampling_fields(s: SamplingParams, *, stop: str | None, top_k: bool = True, seed: bool = False) -> dict[str, Any]:
    """The sampling fields of a client's request: temperature and top_p always; top_k, the stop list (under the
    wire's name for it; None: the wire has none) and the seed where the wire has them and they are set."""
    fields: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p}
    if top_k and s.top_k:
        fields["top_k"] = s.top_k
    if stop and s.stop:
        fields[stop] = list(s.stop)
    if seed and s.seed is not None:
        fields["seed"] = s.seed
    return fields


def dumps(value: object) -> str:
    """Compact JSON, non-ASCII kept as is (what the APIs send)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sse(data: Mapping[str, object] | str, event: str | None = None) -> bytes:
    """One server-sent event. JSON escapes newlines, so a single `data:` line is always enough."""
    payload = data if isinstance(data, str) else dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode("utf-8", errors="replace")


def sse_comment(text: str) -> bytes:
    """An SSE comment line: clients skip it (a keep-alive)."""
    return f": {text}\n\n".encode()


def pieces(text: str, size: int | None) -> Iterator[str]:
    """`text` in deltas of at most `size` characters (one delta when size is None; none when empty)."""
    if not text:
        return
    if not size or size >= len(text):
        yield text
        return
    for start in range(0, len(text), size):
        yield text[start : start + size]
