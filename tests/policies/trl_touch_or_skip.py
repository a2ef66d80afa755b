"""Scripted policy for the TRL tests: a bash tool call, then a short answer. Episodes alternate between
`touch done.txt` (the task passes) and `echo skip` (it fails), so a GRPO group of an even size has signal."""

import itertools
import json

_episodes = itertools.count()


def respond(conversation, call_index):
    if not any(m.role == "tool" for m in conversation.messages):
        command = "touch done.txt" if next(_episodes) % 2 == 0 else "echo skip"
        return "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": command}}) + "\n</tool_call>"
    return "Done."
