"""The oracle's GUI demonstrations: each step's target found in the latest page snapshot, one tool call per
model call, a look when the page came as an image, then done; a step that failed or an element that is not
there stops it with a message naming the step. (The whole loop through the real harness and browser:
tests/harness/test_computer_use.py.)"""

from __future__ import annotations

import json

import pytest

from openforge.core import Conversation, Message, TaskPayload, ToolCall, ToolSpec
from openforge.harness.computer_use_agent import tool_specs
from openforge.inference.gui_oracle import FORMATS, gui_reply
from openforge.inference.oracle import OraclePolicy
from openforge.inference.scripted import ScriptError
from openforge.tasks.gui_actions import load_actions

PAGE = """page "New order" http://127.0.0.1:8080/
text "Customer"
[1] textbox "Customer" (value "nobody")
[2] combobox "Plan" (value "Basic")
  [3] option "Basic" (selected)
[4] heading "Save"
[5] button "Save"
[6] link "A very long name…"
"""
STEPS = (
    {"tool": "type", "target": {"role": "textbox", "name": "Customer"}, "text": "Ada"},
    {"tool": "click", "target": {"role": "button", "name": "Save"}},
    {"tool": "navigate", "url": "/orders"},
)
TOOLS = [ToolSpec(name=t["function"]["name"], parameters=t["function"]["parameters"]) for t in tool_specs("screenshot")]


def payload(steps=STEPS, gui_format="computer-use") -> TaskPayload:
    return TaskPayload(id="t", actions=steps, gui_format=gui_format)


def conversation(*turns: tuple[str, dict, str]) -> Conversation:
    """The start page, then (tool, arguments, its result) per turn."""
    messages = [Message(role="user", content="Save an order.\n\nThe page:\n" + PAGE)]
    for i, (name, arguments, result) in enumerate(turns):
        messages.append(Message(role="assistant", tool_calls=[ToolCall(id=f"c{i}", name=name, arguments=arguments)]))
        messages.append(Message(role="tool", tool_call_id=f"c{i}", content=result))
    return Conversation(messages=messages, tools=TOOLS)


def test_the_snapshot_format_reads_the_harness_lines():
    assert FORMATS["computer-use"].elements(PAGE) == [
        ("1", "textbox", "Customer"),
        ("2", "combobox", "Plan"),
        ("3", "option", "Basic"),
        ("4", "heading", "Save"),
        ("5", "button", "Save"),
        ("6", "link", "A very long name…"),
    ]


def test_each_step_goes_to_the_element_of_the_latest_snapshot_then_done():
    assert gui_reply(conversation(), payload()) == {"name": "type", "arguments": {"ref": "1", "text": "Ada"}}
    moved = PAGE.replace("[5] button", "[9] button")
    after_type = conversation(("type", {"ref": "1", "text": "Ada"}, moved))
    assert gui_reply(after_type, payload()) == {"name": "click", "arguments": {"ref": "9"}}
    after_click = conversation(("type", {}, PAGE), ("click", {"ref": "5"}, PAGE))
    assert gui_reply(after_click, payload()) == {"name": "navigate", "arguments": {"url": "/orders"}}
    finished = conversation(("type", {}, PAGE), ("click", {}, PAGE), ("navigate", {}, PAGE))
    assert gui_reply(finished, payload()) == {"name": "done", "arguments": {"answer": "Done."}}
    with_answer = payload((*STEPS, {"tool": "done", "answer": "42"}))
    assert gui_reply(finished, with_answer) == {"name": "done", "arguments": {"answer": "42"}}


def test_a_long_name_cut_by_the_snapshot_still_matches():
    steps = ({"tool": "click", "target": {"role": "link", "name": "A very long name indeed"}},)
    assert gui_reply(conversation(), payload(steps)) == {"name": "click", "arguments": {"ref": "6"}}


def test_a_page_shown_as_an_image_makes_the_oracle_look_first():
    image = 'page "New order" http://127.0.0.1:8080/\n\n[image omitted: this model reads text only]'
    after_type = conversation(("type", {"ref": "1", "text": "Ada"}, image))
    assert gui_reply(after_type, payload()) == {"name": "snapshot", "arguments": {}}
    looked = conversation(("type", {"ref": "1", "text": "Ada"}, image), ("snapshot", {}, PAGE))
    assert gui_reply(looked, payload()) == {"name": "click", "arguments": {"ref": "5"}}


def test_a_failed_step_or_a_missing_element_stops_the_oracle_naming_the_step():
    failed = conversation(("type", {}, "[error: no element [1] on the page]\n" + PAGE))
    with pytest.raises(ScriptError, match=r'step 1 \(type textbox "Customer"\) failed: \[error: no element'):
        gui_reply(failed, payload())
    missing = ({"tool": "click", "target": {"role": "button", "name": "Delete"}},)
    with pytest.raises(ScriptError, match=r'step 1 \(click button "Delete"\): the latest page snapshot has no such'):
        gui_reply(conversation(), payload(missing))
    with pytest.raises(ScriptError, match="'paint', which the oracle cannot read"):
        gui_reply(conversation(), payload(gui_format="paint"))


def test_the_oracle_policy_writes_the_step_as_a_tool_call():
    text = OraclePolicy().respond(conversation(), 0, payload().to_json())
    assert text.startswith("<tool_call>\n") and json.loads(text.split("\n")[1]) == {
        "name": "type",
        "arguments": {"ref": "1", "text": "Ada"},
    }


def test_actions_json_is_checked(tmp_path):
    path = tmp_path / "actions.json"
    assert load_actions(path) is None
    path.write_text(json.dumps(list(STEPS)))
    assert load_actions(path) == list(STEPS)
    for bad, message in [
        ([], "non-empty JSON list"),
        ([{"tool": "drag"}], '"tool" must be one of'),
        ([{"tool": "type", "target": {"role": "textbox", "name": "A"}}], r"step 1 \(type\): missing text"),
        ([{"tool": "click", "target": {"role": "button"}}], '"target" must be'),
        ([{"tool": "click", "target": {"role": "b", "name": "c"}, "why": 1}], r"unknown field\(s\) why"),
        ([{"tool": "scroll", "dy": "down"}], '"dy" must be an integer'),
        ([{"tool": "done"}, {"tool": "key", "key": "Enter"}], "a done step can only be the last"),
    ]:
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=message):
            load_actions(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_actions(path)


# -- OpenClaw: one `browser` tool, Playwright's snapshot lines, a browser that starts on no page ------------------

NOTICE = "SECURITY NOTICE: The following content is from an EXTERNAL, UNTRUSTED source (e.g., email, webhook).\n"
# as OpenClaw 2026.9.6 showed the shipped store app (tests/rollout/test_gui_openclaw.py runs it for real)
OC_PAGE = (
    NOTICE
    + '\n<<<EXTERNAL_UNTRUSTED_CONTENT id="1">>>\nSource: Browser\n---\n'
    + """- generic [active] [ref=e1]:
  - navigation "Main" [ref=e2]:
    - link "Customers" [ref=e5] [cursor=pointer]:
      - /url: /customers
  - heading "New order" [level=1] [ref=e7]
  - textbox "Note" [ref=e8]
  - combobox "Status" [ref=e9]:
    - option "Pending" [selected]
    - option "Shipped"
      - 'link "Order #2" [ref=f2e39] [cursor=pointer]':
  - button "Save" [ref=e10]
"""
    + '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="1">>>'
)
OC_ACTED = NOTICE + '<<<EXTERNAL_UNTRUSTED_CONTENT id="2">>>\n{\n  "ok": true,\n  "url": "http://127.0.0.1:8080/"\n}'
OC_FAILED = (
    '{\n  "status": "error",\n  "tool": "browser",\n  "error": "Error: Unknown ref \\"e8\\". Run a new snapshot"\n}'
)
OC_STEPS = (
    {"tool": "click", "target": {"role": "link", "name": "Order #2"}},
    {"tool": "select", "target": {"role": "combobox", "name": "Status"}, "value": "Shipped"},
    {"tool": "type", "target": {"role": "textbox", "name": "Note"}, "text": "sent by courier"},
    {"tool": "key", "key": "Enter"},
    {"tool": "navigate", "url": "/orders"},
)
OC_TOOLS = [ToolSpec(name="browser", parameters={"type": "object", "properties": {"action": {"type": "string"}}})]
OPEN = {"action": "navigate", "url": "http://127.0.0.1:8080/", "timeoutMs": 120_000}
SNAP = {"action": "snapshot"}


def openclaw(*turns: tuple[dict, str]) -> Conversation:
    """OpenClaw's conversation: the task, then (browser arguments, result) per turn, then its trailing context."""
    messages = [Message(role="user", content="Ship it. The site opens at http://127.0.0.1:8080/.")]
    for i, (arguments, result) in enumerate(turns):
        messages.append(
            Message(role="assistant", tool_calls=[ToolCall(id=f"c{i}", name="browser", arguments=arguments)])
        )
        messages.append(Message(role="tool", tool_call_id=f"c{i}", content=result))
    messages.append(Message(role="user", content="<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> ..."))
    return Conversation(messages=messages, tools=OC_TOOLS)


def oc_payload(steps=OC_STEPS) -> TaskPayload:
    return TaskPayload(id="t", actions=steps, gui_format="openclaw", start_url="http://127.0.0.1:8080/")


def act(request: dict) -> dict:
    return {"name": "browser", "arguments": {"action": "act", "request": request}}


def test_openclaws_snapshot_lines_are_read_quoted_or_not():
    assert FORMATS["openclaw"].elements(OC_PAGE) == [
        ("e2", "navigation", "Main"),
        ("e5", "link", "Customers"),
        ("e7", "heading", "New order"),
        ("e8", "textbox", "Note"),
        ("e9", "combobox", "Status"),
        ("f2e39", "link", "Order #2"),
        ("e10", "button", "Save"),
    ]
    assert FORMATS["openclaw"].elements("""- 'link "Ada''s \\"x\\" #1" [ref=e9]':""") == [
        ("e9", "link", 'Ada\'s "x" #1')
    ]


def test_openclaw_opens_the_start_page_then_snapshots_before_each_targeted_step():
    p = oc_payload()
    assert gui_reply(openclaw(), p) == {"name": "browser", "arguments": OPEN}
    # navigate's inline page names refs that do not act: a snapshot first
    opened = (OPEN, OC_PAGE)
    assert gui_reply(openclaw(opened), p) == {"name": "browser", "arguments": SNAP}
    assert gui_reply(openclaw(opened, (SNAP, OC_PAGE)), p) == act({"kind": "click", "ref": "f2e39"})
    clicked = (opened, (SNAP, OC_PAGE), ({"action": "act"}, OC_ACTED))
    assert gui_reply(openclaw(*clicked), p) == {"name": "browser", "arguments": SNAP}
    selected = (*clicked, (SNAP, OC_PAGE))
    assert gui_reply(openclaw(*selected), p) == act({"kind": "select", "ref": "e9", "values": ["Shipped"]})
    typed = (*selected, ({"action": "act"}, OC_ACTED), (SNAP, OC_PAGE))
    assert gui_reply(openclaw(*typed), p) == act({"kind": "type", "ref": "e8", "text": "sent by courier"})
    keyed = (*typed, ({"action": "act"}, OC_ACTED))
    assert gui_reply(openclaw(*keyed), p) == act({"kind": "press", "key": "Enter"})  # no target: no snapshot
    moved = (*keyed, ({"action": "act"}, OC_ACTED))
    assert gui_reply(openclaw(*moved), p) == {
        "name": "browser",
        "arguments": {"action": "navigate", "url": "http://127.0.0.1:8080/orders"},  # the site's own path
    }
    assert gui_reply(openclaw(*moved, ({"action": "navigate"}, OC_PAGE)), p) == "Done."  # no finishing tool


def test_openclaw_failures_stop_the_oracle_naming_the_step():
    p = oc_payload()
    with pytest.raises(ScriptError, match="opening the start page http://127.0.0.1:8080/ failed"):
        gui_reply(openclaw((OPEN, OC_FAILED)), p)
    with pytest.raises(ScriptError, match=r'(?s)step 1 \(click link "Order #2"\) failed: .*Unknown ref'):
        gui_reply(openclaw((OPEN, OC_PAGE), (SNAP, OC_PAGE), ({"action": "act"}, OC_FAILED)), p)
    with pytest.raises(ScriptError, match="no page snapshot"):  # a snapshot that shows nothing
        gui_reply(openclaw((OPEN, OC_PAGE), (SNAP, NOTICE)), p)
    with pytest.raises(ScriptError, match="no start_url"):
        gui_reply(openclaw(), TaskPayload(id="t", actions=OC_STEPS, gui_format="openclaw"))
