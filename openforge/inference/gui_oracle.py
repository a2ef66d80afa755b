"""The oracle's GUI demonstrations: a task's `solution/actions.json` (`TaskPayload.actions`) sent through a GUI
harness's own tools, one tool call per model call, each step's target ({role, name}) found in the latest
page snapshot of the conversation and sent as that element's ref; then the harness's finishing call.

How a harness shows a page and takes an action differs, so each has a `SnapshotFormat`, chosen by the
payload's `gui_format` (the adapter's `HarnessAdapter.gui_format`): the built-in `computer-use` harness's
lines `[3] button "Save"` are here; another harness's (OpenClaw's `- button "Save" [ref=e12]`) is one more
entry in `FORMATS`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openforge.core import Conversation, Message, TaskPayload
from openforge.inference.scripted import ScriptError

FINAL_ANSWER = "Done."
#: the tools that only look (never a demonstration's step): the oracle calls them when it needs a snapshot
LOOKS = ("snapshot", "screenshot")


@dataclass(frozen=True)
class SnapshotFormat:
    """One harness's page snapshots and tool calls. `element`: a pattern finding each element line (groups
    `ref`, `role`, and `name` as a JSON string); `arguments(step, ref)`: a step's tool arguments; `snapshot`:
    the tool that shows the page again; `finish`: the tool that ends the episode, and its answer argument."""

    element: re.Pattern[str]
    arguments: Callable[[dict[str, Any], str | None], dict[str, Any]]
    snapshot: str = "snapshot"
    finish: tuple[str, str] | None = ("done", "answer")

    def elements(self, text: str) -> list[tuple[str, str, str]]:
        """(ref, role, name) of every element line of a snapshot."""
        found = []
        for m in self.element.finditer(text):
            try:
                name = json.loads(m.group("name"))
            except ValueError:
                continue
            found.append((m.group("ref"), m.group("role"), str(name)))
        return found


def _computer_use_arguments(step: dict[str, Any], ref: str | None) -> dict[str, Any]:
    fields = {"type": ("text",), "select": ("value",), "key": ("key",), "scroll": ("dy",), "navigate": ("url",)}
    arguments: dict[str, Any] = {"ref": ref} if ref is not None else {}
    arguments.update({f: step[f] for f in fields.get(step["tool"], ())})
    return arguments


FORMATS: dict[str, SnapshotFormat] = {
    "computer-use": SnapshotFormat(
        element=re.compile(r'^\s*\[(?P<ref>\d+)\] (?P<role>[^\s"]+) (?P<name>"(?:[^"\\]|\\.)*")', re.MULTILINE),
        arguments=_computer_use_arguments,
    ),
}


def gui_reply(conversation: Conversation | None, payload: TaskPayload) -> dict[str, Any] | str:
    """The oracle's next move in a GUI episode: a tool call ({"name", "arguments"}) or its final text."""
    steps = list(payload.actions or ())
    fmt = FORMATS.get(payload.gui_format or "")
    if fmt is None:
        raise ScriptError(
            f"the task has a GUI demonstration (solution/actions.json) but the harness shows pages in "
            f"{payload.gui_format!r}, which the oracle cannot read; it reads {', '.join(sorted(FORMATS))}"
        )
    if conversation is None:
        return FINAL_ANSWER
    offered = {t.name for t in conversation.tools}
    sent = [c for m in conversation.messages if m.role == "assistant" for c in m.tool_calls if c.name not in LOOKS]
    if sent:
        last = _result_of(conversation, sent[-1].id)
        if last is not None and last.content.startswith("[error:"):
            raise ScriptError(
                f"the oracle's step {len(sent)} ({_describe(steps[len(sent) - 1])}) failed: {last.content[:300]}"
            )
    step: dict[str, Any] = steps[len(sent)] if len(sent) < len(steps) else {"tool": "done"}
    if step["tool"] == "done":
        answer = step.get("answer") or FINAL_ANSWER
        if fmt.finish is not None and fmt.finish[0] in offered:
            return {"name": fmt.finish[0], "arguments": {fmt.finish[1]: answer}}
        return answer
    ref = None
    if "target" in step:
        view = _latest_view(conversation)
        elements = fmt.elements(view.content) if view is not None else []
        if not elements:  # the page was shown as an image (or not yet): ask for the text snapshot
            if fmt.snapshot in offered and not _just_looked(conversation, fmt.snapshot):
                return {"name": fmt.snapshot, "arguments": {}}
            raise ScriptError(f"step {len(sent) + 1} ({_describe(step)}): no page snapshot in the conversation")
        ref = _find(elements, step["target"])
        if ref is None:
            raise ScriptError(
                f"step {len(sent) + 1} ({_describe(step)}): the latest page snapshot has no such element; "
                f"it shows: {'; '.join(f'{r} {json.dumps(n)}' for _, r, n in elements[:40])}"
            )
    if step["tool"] not in offered:
        raise ScriptError(f"step {len(sent) + 1} ({_describe(step)}): the harness offers no {step['tool']!r} tool")
    return {"name": step["tool"], "arguments": fmt.arguments(step, ref)}


def _norm(name: str) -> str:
    return " ".join(name.split())


def _find(elements: list[tuple[str, str, str]], target: dict[str, str]) -> str | None:
    """The ref of the first element with the target's role and name (a name the snapshot cut short with "…"
    matches on what it shows)."""
    want = _norm(target["name"])
    for ref, role, name in elements:
        shown = _norm(name)
        if role == target["role"] and (shown == want or (shown.endswith("…") and want.startswith(shown[:-1]))):
            return ref
    return None


def _latest_view(conversation: Conversation) -> Message | None:
    """The latest message that shows the page: a tool result, or the first user message (the start page)."""
    for message in reversed(conversation.messages):
        if message.role in ("tool", "user"):
            return message
    return None


def _result_of(conversation: Conversation, call_id: str) -> Message | None:
    return next((m for m in conversation.messages if m.role == "tool" and m.tool_call_id == call_id), None)


def _just_looked(conversation: Conversation, tool: str) -> bool:
    calls = [c for m in conversation.messages if m.role == "assistant" for c in m.tool_calls]
    return bool(calls) and calls[-1].name == tool


def _describe(step: dict[str, Any]) -> str:
    target = step.get("target")
    return step["tool"] + (f" {target['role']} {json.dumps(target['name'])}" if target else "")


__all__ = ["FORMATS", "SnapshotFormat", "gui_reply"]
