"""`glm45` — GLM-4.5 / 4.6's calls: the name, then one `<arg_key>`/`<arg_value>` pair per argument, values
as text (converted to the schema's type where that is not a string):

    <tool_call>bash
    <arg_key>command</arg_key>
    <arg_value>ls -la</arg_value>
    </tool_call>
"""

from __future__ import annotations

import re

from openforge.core import ToolSpec

from .base import NameAndArguments, ToolCallFormat, parameter_schema, typed_value

_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)


class GLM45(ToolCallFormat):
    name = "glm45"
    start = "<tool_call>"
    end = "</tool_call>"

    @classmethod
    def detect(cls, chat_template: str) -> bool:
        return "<arg_key>" in chat_template

    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        name, _, rest = body.partition("<arg_key>")
        name = name.strip()
        if not name or any(c in name for c in "<>{}\n"):
            raise ValueError("GLM tool call must start with the tool's name")
        rest = "<arg_key>" + rest if rest else ""
        properties = parameter_schema(tools, name)
        arguments = {k.strip(): typed_value(v, properties.get(k.strip(), {})) for k, v in _PAIR.findall(rest)}
        if _PAIR.sub("", rest).strip():
            raise ValueError("GLM tool call holds text outside <arg_key>/<arg_value> pairs")
        return [(name, arguments)]
