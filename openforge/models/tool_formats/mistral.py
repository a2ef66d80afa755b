"""`mistral` — Mistral's `[TOOL_CALLS]`, in both generations of its tokenizers:

    [TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls"}}]            (tokenizer v2 – v7)
    [TOOL_CALLS]bash[ARGS]{"command": "ls"}                                   (v11 and later)
    [TOOL_CALLS]bash[CALL_ID]a1b2c3d4e[ARGS]{"command": "ls"}                 (with call ids)

A call runs to the next `[TOOL_CALLS]` or the end of the reply. Reasoning is `[THINK]...[/THINK]`.
"""

from __future__ import annotations

import json
import re

from openforge.core import ToolSpec

from .base import NameAndArguments, ToolCallFormat, json_object, named_call

_NAMED = re.compile(r"^\s*([^\[\]\s]+?)\s*(?:\[CALL_ID\]\s*\S*?\s*)?\[ARGS\](.*)$", re.DOTALL)


class Mistral(ToolCallFormat):
    name = "mistral"
    start = "[TOOL_CALLS]"
    end = None
    think = ("[THINK]", "[/THINK]")

    @classmethod
    def detect(cls, chat_template: str) -> bool:
        return "[TOOL_CALLS]" in chat_template

    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        body = body.strip()
        if body.startswith("["):
            try:
                payload = json.loads(body)
            except json.JSONDecodeError as e:
                raise ValueError(f"[TOOL_CALLS] list is not valid JSON: {e.msg} at {e.pos}") from None
            items = payload if isinstance(payload, list) else [payload]
            return [named_call(item) for item in items]
        match = _NAMED.match(body)
        if not match:
            raise ValueError("[TOOL_CALLS] is followed by neither a JSON list nor NAME[ARGS]{...}")
        return [(match.group(1), json_object(match.group(2).strip()))]
