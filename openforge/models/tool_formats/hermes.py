"""`json` — Hermes-style JSON in `<tool_call>` tags: the tiny model, Qwen2.5, Qwen3, Hermes 2/3.

<tool_call>
{"name": "bash", "arguments": {"command": "ls"}}
</tool_call>
"""

from __future__ import annotations

import json

from openforge.core import ToolSpec

from .base import NameAndArguments, ToolCallFormat, named_call


def parse_json_call(body: str) -> NameAndArguments:
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as e:
        raise ValueError(f"tool call is not valid JSON: {e.msg} at {e.pos}") from None
    return named_call(payload)


class HermesJSON(ToolCallFormat):
    name = "json"
    start = "<tool_call>"
    end = "</tool_call>"

    @classmethod
    def detect(cls, chat_template: str) -> bool:
        return "<tool_call>" in chat_template

    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        return [parse_json_call(body)]
