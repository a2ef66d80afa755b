"""Scripted policy: run the task's shipped solution/wrong.sh (found by task id) through bash, then stop."""

import json
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"


def respond(conversation, call_index, task):
    if any(m.role == "tool" for m in conversation.messages):
        return "Done."
    wrong = next(EXAMPLES.glob(f"*/{task['id']}/solution/wrong.sh"))
    return (
        "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": wrong.read_text()}}) + "\n</tool_call>"
    )
