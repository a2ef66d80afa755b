"""`kimi_k2` — Kimi K2's calls, in a section, each with an id `functions.NAME:INDEX`:

<|tool_calls_section_begin|><|tool_call_begin|>functions.bash:0<|tool_call_argument_begin|>
{"command": "ls"}<|tool_call_end|><|tool_calls_section_end|>
"""

from __future__ import annotations

import re

from openforge.core import ToolSpec

from .base import NameAndArguments, ToolCallFormat, json_object

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*(.*?)\s*<\|tool_call_argument_begin\|>(.*?)(<\|tool_call_end\|>|$)", re.DOTALL
)
_ID = re.compile(r"^(?:functions\.)?(.+?)(?::\d+)?$")


class KimiK2(ToolCallFormat):
    name = "kimi_k2"
    start = SECTION_BEGIN
    end = SECTION_END

    @classmethod
    def detect(cls, chat_template: str) -> bool:
        return SECTION_BEGIN in chat_template

    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        calls: list[NameAndArguments] = []
        for m in _CALL.finditer(body):
            if not m.group(3):
                raise ValueError("<|tool_call_begin|> is not closed")
            named = _ID.match(m.group(1))
            if named is None:  # an empty id, or one across lines
                raise ValueError(f"<|tool_call_begin|> {m.group(1)!r} is not a call id functions.NAME:INDEX")
            calls.append((named.group(1), json_object(m.group(2).strip())))
        if not calls:
            raise ValueError(f"{SECTION_BEGIN} holds no <|tool_call_begin|>")
        return calls
