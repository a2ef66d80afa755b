"""Scripted policy for the crash test: a tool call every turn; the fourth call takes long (the test kills the
proxy while it is in flight)."""

import time


def respond(conversation, call_index):
    if call_index == 3:
        time.sleep(30)
    return f'<tool_call>\n{{"name": "bash", "arguments": {{"command": "echo {call_index}"}}}}\n</tool_call>'
