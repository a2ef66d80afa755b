"""`llama3_json` — Llama 3.1 / 3.2 / 3.3 JSON tool calls: the whole reply is one or more JSON objects
(separated by `;`), optionally after `<|python_tag|>`; the turn ends with `<|eom_id|>` or `<|eot_id|>`:

    <|python_tag|>{"name": "bash", "parameters": {"command": "ls"}}

A reply that does not start with a call (`{"name"` or `<|python_tag|>`) is text. Built-in tools called as
Python (`brave_search.call(query=...)`) are not JSON and are reported as unreadable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from openforge.core import ParsedOutput, ToolCall, ToolSpec

from .base import NameAndArguments, ToolCallFormat, finish, named_call

PYTHON_TAG = "<|python_tag|>"
_BARE_CALL = re.compile(r'^\s*\{\s*"name"\s*:')


class Llama3JSON(ToolCallFormat):
    name = "llama3_json"
    start = PYTHON_TAG
    end = None
    think = None
    whole_reply = True  # a bare JSON reply has no start marker: known to be a call only once it is whole

    @classmethod
    def detect(cls, chat_template: str) -> bool:
        return "<|start_header_id|>" in chat_template and (
            "<|python_tag|>" in chat_template or '"parameters"' in chat_template
        )

    def parse(self, text: str, tools: list[ToolSpec] | None, call_id: Callable[[], str]) -> ParsedOutput:
        at = text.find(PYTHON_TAG)
        if at >= 0:
            before, body = text[:at], text[at + len(PYTHON_TAG) :]
        elif _BARE_CALL.match(text):
            before, body = "", text
        else:
            return finish(None, text, [], [], tools)
        try:
            found = self.parse_block(body, tools)
        except ValueError as e:
            return finish(None, text, [], [str(e)], tools)
        return finish(None, before, [ToolCall(id=call_id(), name=n, arguments=a) for n, a in found], [], tools)

    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        decoder = json.JSONDecoder()
        calls: list[NameAndArguments] = []
        pos, body = 0, body.strip()
        while pos < len(body):
            try:
                payload, pos = decoder.raw_decode(body, pos)
            except json.JSONDecodeError as e:
                raise ValueError(f"tool call is not valid JSON: {e.msg} at {e.pos}") from None
            calls.append(named_call(payload, ("parameters", "arguments")))
            while pos < len(body) and body[pos] in " \t\r\n;":
                pos += 1
        if not calls:
            raise ValueError(f"{PYTHON_TAG} is followed by no tool call")
        return calls
