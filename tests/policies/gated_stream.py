"""Scripted policy for the streaming tests: a reply written in pieces, held half-written until the test has
seen its first piece arrive.

The user's message names a gate file (`GATE=/path`). The reply's first piece is streamed at once; the rest
only once the gate file exists — the test creates it when it has received the first piece, so a proxy that
sent nothing before the reply was complete would never release it. After 60 s the policy gives up, writes
`<gate>.timeout` and finishes (the test then fails); when released it writes `<gate>.released`.

The reply: `FIRST-PIECE ` then, released, `second piece.` and, if the message says `TOOL`, a tool call to the
first offered tool (`BAD-TOOL`: tool-call markup that does not parse). With `SILENT-FIRST` nothing at all is
written until the gate opens (a long prefill, as the client sees it). Calls without tools (side calls) and
calls after a tool result answer at once.
"""

import json
import re
import time
from pathlib import Path

GATE = re.compile(r"GATE=(\S+)")


def _gate(conversation):
    for message in conversation.messages:
        found = GATE.search(message.content or "")
        if found:
            return Path(found.group(1))
    return None


def _wait(gate: Path) -> None:
    deadline = time.monotonic() + 60
    while not gate.exists():
        if time.monotonic() > deadline:
            Path(f"{gate}.timeout").write_text("the first piece never reached the client")
            return
        time.sleep(0.01)
    Path(f"{gate}.released").write_text("ok")


def respond(conversation, call_index):
    gate = _gate(conversation)
    if gate is None or not conversation.tools or any(m.role == "tool" for m in conversation.messages):
        return "Done."
    return _pieces(conversation, gate)


def _pieces(conversation, gate):
    text = " ".join(m.content for m in conversation.messages if m.role == "user")
    if "SILENT-FIRST" in text:
        _wait(gate)
    yield "FIRST-PIECE "
    if "SILENT-FIRST" not in text:
        _wait(gate)
    yield "second piece."
    if "BAD-TOOL" in text:
        yield '\n<tool_call>\n{"name": "broken", "arguments": {"x": \n</tool_call>'
    elif "TOOL" in text:
        tool = conversation.tools[0]
        argument = next(iter((tool.parameters or {}).get("properties", {})), "command")
        yield "\n<tool_call>\n" + json.dumps({"name": tool.name, "arguments": {argument: "echo hi"}}) + "\n</tool_call>"


def respond_side(conversation):
    return "Side answer"
