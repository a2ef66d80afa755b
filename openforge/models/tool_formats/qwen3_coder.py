"""`qwen3_coder` — Qwen3-Coder's XML-ish calls, one `<parameter=...>` per argument, values as text:

    <tool_call>
    <function=edit>
    <parameter=path>
    a.py
    </parameter>
    </function>
    </tool_call>

A `<tool_call>` block holding JSON instead is read as the `json` format (the model may fall back to it).
"""

from __future__ import annotations

import re

from openforge.core import ToolSpec

from .base import NameAndArguments, ToolCallFormat, parameter_schema, typed_value
from .hermes import parse_json_call

_FUNCTION = re.compile(r"^\s*<function=([^>\n]+)>(.*?)</function>\s*$", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.DOTALL)


class Qwen3Coder(ToolCallFormat):
    name = "qwen3_coder"
    start = "<tool_call>"
    end = "</tool_call>"

    @classmethod
    def detect(cls, chat_template: str) -> bool:
        return "<function=" in chat_template

    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        if "<function=" not in body:
            return [parse_json_call(body)]
        match = _FUNCTION.match(body.strip())
        if not match:
            raise ValueError("malformed <function=...> block")
        name = match.group(1).strip()
        properties = parameter_schema(tools, name)
        arguments = {
            param.strip(): typed_value(raw, properties.get(param.strip(), {}))
            for param, raw in _PARAMETER.findall(match.group(2))
        }
        return [(name, arguments)]
