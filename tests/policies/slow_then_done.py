"""Scripted policy: a slow command, then the task's solution (touch done.txt), then stop."""

import json


def respond(conversation, call_index, task):
    tools = [m for m in conversation.messages if m.role == "tool"]
    if not tools:
        return (
            "<tool_call>\n"
            + json.dumps({"name": "bash", "arguments": {"command": "sleep 3; touch done.txt"}})
            + "\n</tool_call>"
        )
    return "Done."
