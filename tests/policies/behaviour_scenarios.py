"""Scripted policy for the behaviour-analytics tests: the user's instruction names a scenario, and the policy
plays its replies in order (one per model call). A reply is a shell command (sent as a `bash` tool call),
`read:PATH` (a `read` tool call), raw text starting with `<` (sent as sampled, e.g. broken tool markup), or a
plain final answer."""

import json

SCENARIOS = {
    # a failed command, then a successful retry that writes the file; no check afterwards
    "retry": ["cat missing.txt", "echo hi > missing.txt", "Done."],
    # write, then read back
    "readback": ["echo x > f.txt", "cat f.txt", "Done."],
    # write with the dedicated tool... then check with the read tool
    "write-read-tool": ["echo y > g.txt", "read:g.txt", "Done."],
    # unparseable tool-call markup ends the episode
    "broken": ['<tool_call>\n{"name": "bash", "arguments": {"command": \n</tool_call>'],
    # a failure, then giving up
    "give-up": ["cat missing.txt", "I could not do it."],
}


def respond(conversation, call_index):
    instruction = next(m.content for m in conversation.messages if m.role == "user")
    plan = SCENARIOS[instruction.split("scenario:", 1)[1].strip()]
    reply = plan[min(call_index, len(plan) - 1)]
    if reply.startswith("<") or " " not in reply and reply.endswith(".") or reply[0].isupper():
        return reply
    if reply.startswith("read:"):
        call = {"name": "read", "arguments": {"path": reply[5:]}}
    else:
        call = {"name": "bash", "arguments": {"command": reply}}
    return "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"


def respond_side(conversation):
    return "Title"
