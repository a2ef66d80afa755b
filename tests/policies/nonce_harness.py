"""Scripted policy for the real-harness tests.

1. Run a shell command (with the harness's own shell tool) that makes a random nonce, prints it and saves it
   to nonce.txt.
2. Read the nonce out of that tool *result* as the proxy decoded it, and write it to result.txt.
3. Answer in plain text.

The text is exactly what the chat template renders for the same tool call, so rendering the conversation
from scratch gives the same tokens the proxy spliced.
"""

import json
import re

from openforge.harness import ADAPTERS

MAKE_NONCE = "head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \\n' | tee nonce.txt"


def _shell_tool(conversation):
    offered = {t.name for t in conversation.tools}
    for adapter in ADAPTERS.values():
        if adapter.shell_tool and adapter.shell_tool[0] in offered:
            return adapter.shell_tool
    raise RuntimeError(f"no known shell tool among {sorted(offered)}")


def _call(conversation, command):
    name, arg = _shell_tool(conversation)
    return (
        "<tool_call>\n" + json.dumps({"name": name, "arguments": {arg: command}}, ensure_ascii=False) + "\n</tool_call>"
    )


def respond(conversation, call_index):
    results = [m for m in conversation.messages if m.role == "tool"]
    if not results:
        return _call(conversation, MAKE_NONCE)
    if len(results) == 1:
        found = re.findall(r"\b[0-9a-f]{12}\b", results[0].content)
        if not found:
            return f"I could not find the nonce in: {results[0].content!r}"
        return _call(conversation, f"echo {found[-1]} > result.txt")
    return "Done: the nonce is saved in result.txt."


def respond_side(conversation):
    return "Nonce task"
