"""One model family's tool-call markup: where a call starts and ends in sampled text, and how to read it.

A format is small and stateless: its markers (`start` / `end` around a block of calls, `end` None where a
block runs to the end of the reply; `think` around reasoning) and how to read one block (`parse_block`). The
one parser of sampled text, `openforge.proxy.output_parser.OutputParser`, finds the markers as the text
streams in, holds a block back until it closes and hands it to `parse_block`; markup that cannot be read is
left in the text and named in `parse_error`. Formats whose calls cannot be found by markers alone as the text
streams (`whole_reply`: Llama 3's bare JSON reply, gpt-oss's harmony messages) implement `parse` for the
whole reply instead, and the parser calls it when the reply is complete. Parsing never rewrites what the
model sampled: the token ids are recorded as sampled, and the parse only decides how the reply is shown.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from openforge.core import ParsedOutput, ToolCall, ToolSpec

NameAndArguments = tuple[str, dict[str, Any]]


class ToolCallFormat(ABC):
    name: ClassVar[str]
    start: ClassVar[str]
    end: ClassVar[str | None]
    # Reasoning before the answer, as (open, close); the open marker may be in the prompt (then only close is
    # sampled). None: the format has no such markup.
    think: ClassVar[tuple[str, str] | None] = ("<think>", "</think>")
    # How earlier tool calls are handed back to the chat template: as objects (most templates) or as JSON text,
    # with no content (None) when the message only calls tools (templates that concatenate `arguments` into a
    # string and test `content is none`, e.g. DeepSeek's).
    history_arguments: ClassVar[Literal["object", "json_string"]] = "object"
    # True: calls cannot be found by `start`/`end` as the text streams; the format reads the whole reply (`parse`).
    whole_reply: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def detect(cls, chat_template: str) -> bool:
        """Whether a chat template renders tool calls in this format."""

    @abstractmethod
    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        """The calls in one block; ValueError (its message names the problem) when they cannot be read."""

    def parse(self, text: str, tools: list[ToolSpec] | None, call_id: Callable[[], str]) -> ParsedOutput:
        """A whole reply → its parts, for `whole_reply` formats only (the others are read by the output parser)."""
        raise NotImplementedError(f"{self.name}: read by openforge.proxy.output_parser as the text streams in")


def finish(
    reasoning: str | None, content: str, calls: list[ToolCall], errors: list[str], tools: list[ToolSpec] | None
) -> ParsedOutput:
    """The parsed reply, with calls to tools that were not offered named in `parse_error`."""
    if tools is not None:
        known = {t.name for t in tools}
        errors = errors + [f"tool {c.name!r} was not offered" for c in calls if c.name not in known]
    return ParsedOutput(
        reasoning=reasoning, content=content.strip(), tool_calls=calls, parse_error="; ".join(errors) or None
    )


def json_object(raw: str, what: str = "tool call arguments") -> dict[str, Any]:
    """`raw` as a JSON object; arguments given as a JSON string holding an object are unwrapped."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} are not valid JSON: {e.msg} at {e.pos}") from None
    if isinstance(value, str):  # some models encode the arguments as a JSON string
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"{what} are a string that is not JSON") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object")
    return value


def named_call(payload: Any, arguments_keys: tuple[str, ...] = ("arguments",)) -> NameAndArguments:
    """`{"name": ..., "arguments": {...}}` (or another arguments key) → (name, arguments)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        raise ValueError('tool call JSON needs a string "name"')
    arguments: Any = {}
    for key in arguments_keys:
        if key in payload:
            arguments = payload[key]
            break
    if isinstance(arguments, str):
        arguments = json_object(arguments)
    if not isinstance(arguments, dict):
        raise ValueError("tool call arguments must be a JSON object")
    return payload["name"], arguments


def parameter_schema(tools: list[ToolSpec] | None, tool: str) -> dict[str, Any]:
    """The JSON-schema `properties` of a tool's parameters (empty when the tool is unknown)."""
    schema = next((t.parameters for t in tools or [] if t.name == tool), {})
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    return properties if isinstance(properties, dict) else {}


def typed_value(raw: str, schema: Any) -> Any:
    """A parameter that arrives as text, converted to the schema's type where that is not a string."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind in (None, "string") or (isinstance(kind, list) and "string" in kind):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
