"""One model family's tool-call markup: where a call starts and ends in sampled text, and how to read it.

A format is small and stateless. `parse(text, tools, call_id)` splits one reply (control tokens kept, the
end-of-turn token removed) into reasoning, text and tool calls. Markup that cannot be read is left in the
text and named in `parse_error`: the harness still gets a valid reply and the record says what went wrong.
The parser never rewrites what the model sampled: the token ids are recorded as sampled, and the parse only
decides how the reply is shown to the harness.

`start` / `end` are the markers an incremental (streaming) parser needs to hold text back while a call may be
forming; `end` is None where a call runs to the end of the reply.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from openforge.core import ParsedOutput, ToolCall, ToolSpec

NameAndArguments = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Block:
    """A span of the reply that holds tool-call markup; `closed` is False when its end marker never came."""

    start: int
    end: int
    body: str
    closed: bool = True


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

    @classmethod
    @abstractmethod
    def detect(cls, chat_template: str) -> bool:
        """Whether a chat template renders tool calls in this format."""

    @abstractmethod
    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        """The calls in one block; ValueError (its message names the problem) when they cannot be read."""

    def blocks(self, text: str) -> Iterator[Block]:
        """The blocks of tool-call markup in `text`: from each `start` to its `end` (or the end of the text)."""
        if self.end is None:
            pattern = re.compile(re.escape(self.start) + r"(.*?)(?=" + re.escape(self.start) + r"|$)", re.DOTALL)
            for m in pattern.finditer(text):
                yield Block(m.start(), m.end(), m.group(1), True)
            return
        pattern = re.compile(re.escape(self.start) + r"(.*?)(" + re.escape(self.end) + r"|$)", re.DOTALL)
        for m in pattern.finditer(text):
            yield Block(m.start(), m.end(), m.group(1), bool(m.group(2)))

    def split_reasoning(self, text: str) -> tuple[str | None, str]:
        if self.think is None or self.think[1] not in text:
            return None, text
        opening, closing = self.think
        m = re.match(r"^\s*(?:" + re.escape(opening) + r")?(.*?)" + re.escape(closing) + r"\s*", text, re.DOTALL)
        if not m:
            return None, text
        return m.group(1).strip("\n"), text[m.end():]

    def parse(self, text: str, tools: list[ToolSpec] | None, call_id: Callable[[], str]) -> ParsedOutput:
        reasoning, text = self.split_reasoning(text)
        calls: list[ToolCall] = []
        errors: list[str] = []
        kept: list[str] = []  # text outside tool calls, and markup that could not be read
        pos = 0
        for block in self.blocks(text):
            kept.append(text[pos:block.start])
            pos = block.end
            try:
                if not block.closed:
                    raise ValueError(f"{self.start} is not closed")
                found = self.parse_block(block.body, tools)
            except ValueError as e:
                errors.append(str(e))
                kept.append(text[block.start:block.end])
                continue
            calls.extend(ToolCall(id=call_id(), name=name, arguments=arguments) for name, arguments in found)
        kept.append(text[pos:])
        return finish(reasoning, "".join(kept), calls, errors, tools)


def finish(reasoning: str | None, content: str, calls: list[ToolCall], errors: list[str],
           tools: list[ToolSpec] | None) -> ParsedOutput:
    """The parsed reply, with calls to tools that were not offered named in `parse_error`."""
    if tools is not None:
        known = {t.name for t in tools}
        errors = errors + [f"tool {c.name!r} was not offered" for c in calls if c.name not in known]
    return ParsedOutput(reasoning=reasoning, content=content.strip(), tool_calls=calls,
                        parse_error="; ".join(errors) or None)


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
