"""Scripted policy: by task id, a reply too long for the harness's per-reply cap (`long-*`: a tool call whose
command is a long echo, so the cap cuts it before `</tool_call>`) or a tool call that is not JSON
(`garbled-*`); after a tool result, "Done."."""

import json


def respond(conversation, call_index, task):
    if any(m.role == "tool" for m in conversation.messages):
        return "Done."
    if task["id"].startswith("garbled"):
        return '<tool_call>\n{"name": "bash", "arguments": {"command": touch done.txt}}\n</tool_call>'
    command = "echo " + " ".join(f"word{i}" for i in range(200)) + " > /dev/null && touch done.txt"
    return "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": command}}) + "\n</tool_call>"
