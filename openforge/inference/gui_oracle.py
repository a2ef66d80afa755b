"""The oracle's GUI demonstrations: a task's `solution/actions.json` (`TaskPayload.actions`) sent through a GUI
harness's own tools, one tool call per model call, each step's target ({role, name}) found in the latest
page snapshot of the conversation and sent as that element's ref; then the harness's finishing call.

How a harness shows a page and takes an action differs, so each has a `SnapshotFormat`, chosen by the
payload's `gui_format` (the adapter's `HarnessAdapter.gui_format`): the built-in `computer-use` harness
(a tool per action, lines `[3] button "Save"`, the start page in its first message) and OpenClaw (one `browser`
tool whose `action` says what to do, Playwright's lines `- button "Save" [ref=e12]`, a browser that starts on
no page: the oracle opens the task's start URL first, and takes a fresh snapshot before each targeted step,
since only a `snapshot` action's refs act).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from openforge.core import Conversation, Message, TaskPayload, ToolCall
from openforge.inference.scripted import ScriptError

FINAL_ANSWER = "Done."
#: the tools that only look (never a demonstration's step): the oracle calls them when it needs a snapshot
LOOKS = ("snapshot", "screenshot")


@dataclass(frozen=True)
class SnapshotFormat:
    """One harness's page snapshots and tool calls. `element`: a pattern finding each element line (groups
    `ref`, `role`, and `name` as a JSON string); `arguments(step, ref)`: a step's tool arguments; `tool`: the
    one tool every call goes to (None: the step's own tool, `step["tool"]`); `snapshot`: the call that shows the
    page again; `looks(call)`: whether a call only looked; `failed(result)`: whether a tool result says the
    step failed; `finish`: the tool that ends the episode, and its answer argument (None: a plain answer);
    `opens`: the harness starts on no page, so the first call opens the task's start URL (a navigate step with
    `opening`'s fields); `fresh`: a step's refs
    must come from a snapshot taken after the last step (the harness's other page views show refs that do not
    act)."""

    element: re.Pattern[str]
    arguments: Callable[[dict[str, Any], str | None], dict[str, Any]]
    tool: str | None = None
    snapshot: dict[str, Any] | None = None
    looks: Callable[[ToolCall], bool] = lambda call: call.name in LOOKS
    failed: Callable[[str], bool] = lambda result: result.startswith("[error:")
    finish: tuple[str, str] | None = ("done", "answer")
    opens: bool = False
    opening: dict[str, Any] = field(default_factory=dict)
    fresh: bool = False

    def elements(self, text: str) -> list[tuple[str, str, str]]:
        """(ref, role, name) of every element line of a snapshot."""
        found = []
        for m in self.element.finditer(text):
            try:
                name = json.loads(m.group("name"))
            except ValueError:
                continue
            if m.groupdict().get("quoted"):  # a YAML-quoted line (`- 'link "Order #2" [ref=e7]'`) doubles its '
                name = str(name).replace("''", "'")
            found.append((m.group("ref"), m.group("role"), str(name)))
        return found

    def call(self, step: dict[str, Any], ref: str | None) -> dict[str, Any]:
        return {"name": self.tool or step["tool"], "arguments": self.arguments(step, ref)}

    def look(self) -> dict[str, Any]:
        return self.snapshot or {"name": "snapshot", "arguments": {}}


def _computer_use_arguments(step: dict[str, Any], ref: str | None) -> dict[str, Any]:
    fields = {"type": ("text",), "select": ("value",), "key": ("key",), "scroll": ("dy",), "navigate": ("url",)}
    arguments: dict[str, Any] = {"ref": ref} if ref is not None else {}
    arguments.update({f: step[f] for f in fields.get(step["tool"], ())})
    return arguments


def _openclaw_arguments(step: dict[str, Any], ref: str | None) -> dict[str, Any]:
    """A step as OpenClaw's `browser` tool takes it: `navigate {url}`, else `act` with a request of one kind
    (type fills the field, as the demonstration means; a scroll is a page key, OpenClaw has no plain scroll)."""
    tool = step["tool"]
    if tool == "navigate":
        return {
            "action": "navigate",
            "url": step["url"],
            **({"timeoutMs": step["timeout_ms"]} if "timeout_ms" in step else {}),
        }
    request: dict[str, Any] = {
        "click": lambda: {"kind": "click", "ref": ref},
        "type": lambda: {"kind": "type", "ref": ref, "text": step["text"]},
        "select": lambda: {"kind": "select", "ref": ref, "values": [step["value"]]},
        "key": lambda: {"kind": "press", "key": step["key"]},
        "scroll": lambda: {"kind": "press", "key": "PageDown" if step["dy"] > 0 else "PageUp"},
    }[tool]()
    return {"action": "act", "request": request}


def _openclaw_failed(result: str) -> bool:
    """OpenClaw answers a browser action that failed with a JSON document whose `status` is `error`."""
    try:
        doc = json.loads(result)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("status") == "error"


FORMATS: dict[str, SnapshotFormat] = {
    "computer-use": SnapshotFormat(
        element=re.compile(r'^\s*\[(?P<ref>\d+)\] (?P<role>[^\s"]+) (?P<name>"(?:[^"\\]|\\.)*")', re.MULTILINE),
        arguments=_computer_use_arguments,
    ),
    # Playwright's snapshot lines, `- textbox "Customer" [ref=e4]`, `- link "Next" [level=2] [ref=f1e7]`, a line
    # with YAML's special characters quoted whole: `- 'link "Order #2" [ref=e7] [cursor=pointer]':`
    "openclaw": SnapshotFormat(
        element=re.compile(
            r'^\s*-\s+(?P<quoted>\'?)(?P<role>\w+)\s+(?P<name>"(?:[^"\\]|\\.)*")[^\n]*?\[ref=(?P<ref>[^\]\s]+)\]',
            re.MULTILINE,
        ),
        arguments=_openclaw_arguments,
        tool="browser",
        snapshot={"name": "browser", "arguments": {"action": "snapshot"}},
        looks=lambda call: call.name == "browser" and call.arguments.get("action") in LOOKS,
        failed=_openclaw_failed,
        finish=None,
        opens=True,
        # the first navigation starts the browser too: OpenClaw's longest navigation deadline, not its 20 s
        opening={"timeout_ms": 120_000},
        fresh=True,
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
    calls = [c for m in conversation.messages if m.role == "assistant" for c in m.tool_calls]
    if fmt.opens:
        if not calls:
            if not payload.start_url:
                raise ScriptError("the harness starts on no page and the task payload has no start_url")
            return fmt.call({"tool": "navigate", "url": payload.start_url, **fmt.opening}, None)
        opened = _result_of(conversation, calls[0].id)
        if opened is not None and fmt.failed(opened.content):
            raise ScriptError(f"opening the start page {payload.start_url} failed: {opened.content[-300:]}")
        calls = calls[1:]  # the opening is no step of the demonstration
    sent = [c for c in calls if not fmt.looks(c)]
    if sent:
        last = _result_of(conversation, sent[-1].id)
        if last is not None and fmt.failed(last.content):
            raise ScriptError(
                f"the oracle's step {len(sent)} ({_describe(steps[len(sent) - 1])}) failed: {last.content[-300:]}"
            )
    step: dict[str, Any] = steps[len(sent)] if len(sent) < len(steps) else {"tool": "done"}
    if step["tool"] == "done":
        answer = step.get("answer") or FINAL_ANSWER
        if fmt.finish is not None and fmt.finish[0] in offered:
            return {"name": fmt.finish[0], "arguments": {fmt.finish[1]: answer}}
        return answer
    if step["tool"] == "navigate" and payload.start_url:  # a path of the task's own site
        step = {**step, "url": urljoin(payload.start_url, step["url"])}
    ref = None
    if "target" in step:
        look = fmt.look()
        snapped = bool(calls) and _is(calls[-1], look)
        view = _latest_view(conversation, fmt.opens) if snapped or not fmt.fresh else None
        elements = fmt.elements(view.content) if view is not None else []
        if not elements:  # the page was shown as an image, its refs do not act, or it was not shown yet
            if look["name"] in offered and not snapped:
                return look
            raise ScriptError(f"step {len(sent) + 1} ({_describe(step)}): no page snapshot in the conversation")
        ref = _find(elements, step["target"])
        if ref is None:
            raise ScriptError(
                f"step {len(sent) + 1} ({_describe(step)}): the latest page snapshot has no such element; "
                f"it shows: {'; '.join(f'{r} {json.dumps(n)}' for _, r, n in elements[:40])}"
            )
    call = fmt.call(step, ref)
    if call["name"] not in offered:
        raise ScriptError(f"step {len(sent) + 1} ({_describe(step)}): the harness offers no {call['name']!r} tool")
    return call


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


def _latest_view(conversation: Conversation, tool_results_only: bool = False) -> Message | None:
    """The latest message that shows the page: a tool result, or the first user message (the start page) of a
    harness that shows it there (OpenClaw's trailing user message is its own context, never the page)."""
    for message in reversed(conversation.messages):
        if message.role == "tool" or (message.role == "user" and not tool_results_only):
            return message
    return None


def _result_of(conversation: Conversation, call_id: str) -> Message | None:
    return next((m for m in conversation.messages if m.role == "tool" and m.tool_call_id == call_id), None)


def _is(call: ToolCall, spec: dict[str, Any]) -> bool:
    """Whether `call` is the call `spec` ({"name", "arguments"}) describes."""
    return call.name == spec["name"] and all(call.arguments.get(k) == v for k, v in spec["arguments"].items())


def _describe(step: dict[str, Any]) -> str:
    target = step.get("target")
    return step["tool"] + (f" {target['role']} {json.dumps(target['name'])}" if target else "")


__all__ = ["FORMATS", "SnapshotFormat", "gui_reply"]
