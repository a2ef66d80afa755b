"""Scripted policy for the behaviour tests on real harnesses: with the harness's own shell tool, a command that
fails (exit 2), a command that writes a file, a command that reads it back; then a final answer."""

import json

from openforge.harness import ADAPTERS

STEPS = ["ls /definitely-missing-dir", "echo hello > out.txt", "cat out.txt"]


def _shell_tool(conversation):
    offered = {t.name for t in conversation.tools}
    for adapter in ADAPTERS.values():
        if adapter.shell_tool and adapter.shell_tool[0] in offered:
            return adapter.shell_tool
    raise RuntimeError(f"no known shell tool among {sorted(offered)}")


def respond(conversation, call_index):
    done = [m for m in conversation.messages if m.role == "tool"]
    if len(done) < len(STEPS):
        name, arg = _shell_tool(conversation)
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": {arg: STEPS[len(done)]}}) + "\n</tool_call>"
    return "Done: out.txt holds hello."


def respond_side(conversation):
    return "Title"
