"""A **scripted solver** for `openforge tasks curate`'s difficulty estimate (a stand-in for the model to be
trained; served as `scripted:examples/curate/scripted_solver.py`). Like the oracle it runs the task's reference
solution through the harness's shell tool — but only on every other attempt at a task (the first, the third,
...), so a sound task's estimated pass rate is about 50%; and it never solves a task that asks for a checksum.
"""

import json
from collections import Counter

_attempts = Counter()


def _shell_tool(conversation, payload):
    named = payload.get("shell_tool")
    offered = {t.name for t in conversation.tools}
    if named and named[0] in offered:
        return named
    for tool in conversation.tools:
        if "command" in (tool.parameters or {}).get("properties", {}):
            return tool.name, "command"
    return None


def respond(conversation, call_index, task):
    payload = task if isinstance(task, dict) else {}
    if any(m.role == "tool" for m in conversation.messages):
        return "Done."
    attempt = _attempts[payload.get("id")]
    _attempts[payload.get("id")] += 1
    tool = _shell_tool(conversation, payload)
    solvable = "checksum" not in (payload.get("instruction") or "").lower()
    if attempt % 2 or not solvable or tool is None or not payload.get("solution"):
        return "I could not work out how to do this."
    call = {"name": tool[0], "arguments": {tool[1]: payload["solution"]}}
    return "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"
