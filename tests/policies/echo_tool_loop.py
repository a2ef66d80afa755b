"""Scripted policy for proxy tests: one tool call, then a final answer quoting the tool result it read.

The answer quotes the last tool result *as decoded by the proxy*, so a test can tell that the proxy really
parsed what the client sent back.
"""


def respond(conversation, call_index):
    tool = conversation.tools[0].name if conversation.tools else None
    last = conversation.messages[-1] if conversation.messages else None
    if tool and (last is None or last.role != "tool"):
        key = "cmd" if tool == "exec" else "command"
        return f'<tool_call>\n{{"name": "{tool}", "arguments": {{"{key}": "echo step-{call_index}"}}}}\n</tool_call>'
    if last is not None and last.role == "tool":
        return f"Done. The tool said: {last.content}"
    return "A short title"


def respond_side(conversation):
    return "Side answer"
