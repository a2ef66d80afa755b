"""`deepseek_v3` — DeepSeek V3 / R1 and V3.1's tool calls, between `<｜tool▁calls▁begin｜>` and
`<｜tool▁calls▁end｜>`, one `<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>` per call:

    <｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{"command": "ls"}\n```<｜tool▁call▁end｜>    (V3, R1)
    <｜tool▁call▁begin｜>bash<｜tool▁sep｜>{"command": "ls"}<｜tool▁call▁end｜>                            (V3.1)

DeepSeek's templates concatenate `arguments` into the prompt as text, so earlier calls go back to the
template with their arguments as JSON text.
"""

from __future__ import annotations

import re

from openforge.core import ToolSpec

from .base import NameAndArguments, ToolCallFormat, json_object

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
_CALL = re.compile(re.escape(CALL_BEGIN) + r"(.*?)(" + re.escape(CALL_END) + r"|$)", re.DOTALL)
_FENCED = re.compile(r"^\s*([^\n]+?)\s*\n```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)


class DeepSeekV3(ToolCallFormat):
    name = "deepseek_v3"
    start = CALLS_BEGIN
    end = CALLS_END
    history_arguments = "json_string"

    @classmethod
    def detect(cls, chat_template: str) -> bool:
        return CALLS_BEGIN in chat_template

    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        calls: list[NameAndArguments] = []
        for m in _CALL.finditer(body):
            if not m.group(2):
                raise ValueError(f"{CALL_BEGIN} is not closed")
            left, sep, right = m.group(1).partition(SEP)
            if not sep:
                raise ValueError(f"tool call without {SEP}")
            fenced = _FENCED.match(right)
            if fenced:  # V3 / R1: TYPE<sep>NAME\n```json\nARGS\n```
                calls.append((fenced.group(1), json_object(fenced.group(2))))
            else:  # V3.1: NAME<sep>ARGS
                calls.append((left.strip(), json_object(right.strip())))
        if not calls:
            raise ValueError(f"{CALLS_BEGIN} holds no {CALL_BEGIN}")
        return calls
