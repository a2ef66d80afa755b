"""Sampled text → reasoning, text and tool calls.

Two tool-call formats:
- `json` (the tiny model, Qwen2.5, Hermes): `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`
- `qwen3_coder`: `<tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>`

Markup that cannot be parsed is left in the text and reported in `parse_error`; the harness still gets a
valid reply (never a 500) and the record says what went wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any

from openforge.core import ParsedOutput, ToolCall, ToolSpec
from openforge.dialects import new_id

_THINK = re.compile(r"^\s*(?:<think>)?(.*?)</think>\s*", re.DOTALL)
_TOOL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FUNCTION = re.compile(r"^\s*<function=([^>\n]+)>(.*?)</function>\s*$", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.DOTALL)


def parse_output(
    text: str,
    tool_format: str = "json",
    tools: list[ToolSpec] | None = None,
    id_prefix: str = "call_",
) -> ParsedOutput:
    """Split sampled text (control tokens kept, end-of-turn token removed) into its parts."""
    reasoning = None
    think = _THINK.match(text) if "</think>" in text else None
    if think:
        reasoning = think.group(1).strip("\n")
        text = text[think.end() :]

    calls: list[ToolCall] = []
    errors: list[str] = []
    kept: list[str] = []  # text outside tool calls, and markup we could not parse
    pos = 0
    for match in _TOOL_BLOCK.finditer(text):
        kept.append(text[pos : match.start()])
        pos = match.end()
        closed = match.group(0).endswith("</tool_call>")
        try:
            if not closed:
                raise ValueError("<tool_call> is not closed")
            name, arguments = _parse_call(match.group(1), tool_format, tools)
        except ValueError as e:
            errors.append(str(e))
            kept.append(match.group(0))
            continue
        calls.append(ToolCall(id=new_id(id_prefix), name=name, arguments=arguments))
    kept.append(text[pos:])
    content = "".join(kept).strip()
    if tools is not None:
        known = {t.name for t in tools}
        for call in calls:
            if call.name not in known:
                errors.append(f"tool {call.name!r} was not offered")
    return ParsedOutput(
        reasoning=reasoning,
        content=content,
        tool_calls=calls,
        parse_error="; ".join(errors) or None,
    )


def _parse_call(body: str, tool_format: str, tools: list[ToolSpec] | None) -> tuple[str, dict[str, Any]]:
    if tool_format == "qwen3_coder" and "<function=" in body:
        return _parse_qwen3_coder(body, tools)
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


def _parse_qwen3_coder(body: str, tools: list[ToolSpec] | None) -> tuple[str, dict[str, Any]]:
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
