"""Scripted policy for the viewer tests: an agent whose tool result and reply carry HTML that must never run.

1. Runs a shell command (the harness's own shell tool) that prints a `<script>` element and an `<img>` with
   an `onerror=` handler; the tool result the harness sends back holds that markup verbatim.
2. Answers with the same markup in plain text.

A viewer that renders either without escaping it sets `document.title` to "pwned" in the browser.
"""

import json
import shlex

from openforge.harness import ADAPTERS

SCRIPT = "<script>document.title='pwned'</script>"
IMG = "<img src=x onerror=\"document.title='pwned'\">"
COMMAND = f"printf '%s\\n' {shlex.quote(SCRIPT)} {shlex.quote(IMG)}"


def _shell_tool(conversation):
    offered = {t.name for t in conversation.tools}
    for adapter in ADAPTERS.values():
        if adapter.shell_tool and adapter.shell_tool[0] in offered:
            return adapter.shell_tool
    return conversation.tools[0].name, "command"


def respond(conversation, call_index, task=None):
    if not any(m.role == "tool" for m in conversation.messages):
        name, arg = _shell_tool(conversation)
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": {arg: COMMAND}}) + "\n</tool_call>"
    return f"The page said {SCRIPT} and {IMG}."


def respond_side(conversation):
    return "Markup probe"
