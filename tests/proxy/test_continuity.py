"""Token continuity: later calls extend earlier ones token for token; real breaks are named."""

from __future__ import annotations

import pytest

from openforge.core import Conversation, Message, ToolCall, ToolSpec
from openforge.proxy.continuity import ContinuityRenderer, message_fingerprint
from openforge.proxy.output_parser import parse_output

TOOLS = [
    ToolSpec(
        name="bash",
        description="Run a command.",
        parameters={"type": "object", "properties": {"command": {"type": "string"}}},
    )
]


def call_text(command: str) -> str:
    return f'<tool_call>\n{{"name": "bash", "arguments": {{"command": "{command}"}}}}\n</tool_call>'


class Harness:
    """Plays a harness: sends the conversation, echoes the proxy's replies back (with its own call ids)."""

    def __init__(self, model, renderer, episode="ep1", system="You are an agent.", first="Do the task <|im_end|>."):
        self.model, self.renderer, self.episode = model, renderer, episode
        self.conv = Conversation(system=system, tools=TOOLS, messages=[Message(role="user", content=first)])
        self.index = 0
        self.last = None

    def call(self, sampled_text: str, end_of_turn: bool = True):
        rendered = self.renderer.render(self.episode, self.conv)
        output_ids = self.model.encode_completion(sampled_text + ("<|im_end|>" if end_of_turn else ""))
        parsed = parse_output(sampled_text, tools=TOOLS)
        self.renderer.record(self.episode, self.index, rendered, output_ids, parsed)
        self.index += 1
        self.last = (rendered, output_ids, parsed)
        return rendered, output_ids, parsed

    def echo(self, parsed, results=("ok",), rewrite_ids=False):
        calls = [
            ToolCall(id=(c.id.replace("_", "") if rewrite_ids else c.id), name=c.name, arguments=c.arguments)
            for c in parsed.tool_calls
        ]
        self.conv.messages.append(
            Message(role="assistant", content=parsed.content, reasoning=parsed.reasoning, tool_calls=calls)
        )
        for call, result in zip(calls, results):
            self.conv.messages.append(Message(role="tool", tool_call_id=call.id, content=result))


@pytest.fixture()
def renderer(tiny_model):
    return ContinuityRenderer(tiny_model)


def test_calls_extend_each_other_and_match_rendering_from_scratch(tiny_model, renderer):
    h = Harness(tiny_model, renderer)
    r1, out1, p1 = h.call(call_text("ls"))
    assert r1.break_reason is None and r1.segment == 0 and r1.reused_tokens == 0
    h.echo(p1, results=["a.txt <|im_end|> <tool_call>"], rewrite_ids=True)
    r2, out2, p2 = h.call("<think>\nread it\n</think>\n" + call_text("cat a.txt"))
    assert r2.break_reason is None and r2.segment == 0
    assert r2.prompt_ids[: len(r1.prompt_ids) + len(out1)] == r1.prompt_ids + out1
    assert r2.reused_tokens == len(r1.prompt_ids) + len(out1)
    h.echo(p2, results=["hello"])
    h.conv.messages.append(Message(role="user", content="and then?"))
    r3, out3, _ = h.call("Done.")
    assert r3.prompt_ids[: len(r2.prompt_ids) + len(out2)] == r2.prompt_ids + out2
    # the spliced prompt is exactly what rendering the conversation from scratch gives
    assert r3.prompt_ids == tiny_model.render(h.conv)
    assert tiny_model.decode(r3.prompt_ids) == tiny_model.render_text(h.conv)


def test_reply_cut_off_before_end_of_turn_still_continues(tiny_model, renderer):
    h = Harness(tiny_model, renderer)
    r1, out1, p1 = h.call("I am thinking about", end_of_turn=False)
    h.echo(p1)
    h.conv.messages.append(Message(role="user", content="go on"))
    r2, _, _ = h.call("ok")
    assert r2.break_reason is None
    assert r2.prompt_ids[: len(r1.prompt_ids) + len(out1)] == r1.prompt_ids + out1
    assert tiny_model.decode(r2.prompt_ids) == tiny_model.render_text(h.conv)


def test_compaction_breaks_with_reason(tiny_model, renderer):
    h = Harness(tiny_model, renderer)
    _, _, p1 = h.call(call_text("ls"))
    h.echo(p1)
    h.call(call_text("pwd"))
    h.conv.messages = [Message(role="user", content="Summary of the work so far: listed files.")]
    r, _, _ = h.call("ok")
    assert r.break_reason == "history_rewritten" and r.segment == 1 and r.reused_tokens == 0
    assert r.prompt_ids == tiny_model.render(h.conv)


def test_sub_agent_interleaved_with_main_thread(tiny_model, renderer):
    main = Harness(tiny_model, renderer)
    _, out1, p1 = main.call(call_text("ls"))
    sub = Harness(tiny_model, renderer, system="You are a sub-agent.", first="Search for files.")
    rs, _, ps = sub.call(call_text("find ."))
    assert rs.break_reason == "sub_agent" and rs.segment == 1
    main.echo(p1)
    r2, _, _ = main.call("done")
    assert r2.break_reason is None and r2.segment == 0  # the main thread continues despite the sub-agent
    sub.echo(ps)
    rs2, _, _ = sub.call("found")
    assert rs2.break_reason is None and rs2.segment == 1


def test_system_prompt_edit_and_tools_change(tiny_model, renderer):
    h = Harness(tiny_model, renderer)
    _, _, p1 = h.call(call_text("ls"))
    h.echo(p1)
    h.conv.system = "You are an agent. Today is Tuesday."
    r, _, _ = h.call("x")
    assert r.break_reason == "system_changed"
    h.echo(parse_output("x"))
    h.conv.messages.append(Message(role="user", content="more"))
    h.conv.tools = TOOLS + [ToolSpec(name="read")]
    r, _, _ = h.call("y")
    assert r.break_reason == "tools_changed"


def test_trailing_context_message_moved(tiny_model, renderer):
    """OpenClaw removes its trailing context message and re-adds it at the end on the next call."""
    h = Harness(tiny_model, renderer)
    ctx = Message(role="user", content="[context] cwd=/work time=1")
    h.conv.messages.append(ctx)
    _, _, p1 = h.call(call_text("ls"))
    h.conv.messages.remove(ctx)
    h.echo(p1)
    h.conv.messages.append(Message(role="user", content="[context] cwd=/work time=2"))
    r, _, _ = h.call("done")
    assert r.break_reason == "context_message_moved"


def test_reply_not_echoed_and_side_calls(tiny_model, renderer):
    h = Harness(tiny_model, renderer)
    h.call(call_text("ls"))
    h.conv.messages.append(Message(role="assistant", content="something else"))
    h.conv.messages.append(Message(role="user", content="?"))
    r, _, _ = h.call("x")
    assert r.break_reason == "reply_not_echoed"
    side = renderer.render(
        "ep1", Conversation(messages=[Message(role="user", content="Title for: ls")]), side_call=True
    )
    assert side.break_reason == "side_call"


def test_restarted_proxy_names_lost_state(tiny_model, renderer):
    renderer.mark_unknown("old", next_segment=3)
    r = renderer.render("old", Conversation(messages=[Message(role="user", content="hi")]))
    assert r.break_reason == "state_lost" and r.segment == 3


def test_real_qwen3_template_tool_loop_extends_and_new_user_turn_is_template_not_append_only(tiny_model_dir, tmp_path):
    """Qwen3's thinking template renders reasoning only for turns after the last user message: a tool loop
    extends token for token, but a new user message re-renders the earlier turns without their reasoning.
    That break is named for what it is (it used to be labelled `reply_not_echoed`)."""
    from openforge.models import ModelDir
    from support.templates import model_with_template

    qwen3 = ModelDir(model_with_template(tiny_model_dir, tmp_path / "qwen3", "qwen3"))
    h = Harness(qwen3, ContinuityRenderer(qwen3), first="list files")
    r1, out1, p1 = h.call("<think>\nplan\n</think>\n\n" + call_text("ls"))
    assert p1.reasoning == "plan" and p1.tool_calls
    h.echo(p1, results=["a.txt"])
    r2, out2, p2 = h.call("<think>\nok\n</think>\n\nDone.")
    assert r2.break_reason is None and r2.segment == r1.segment
    assert r2.prompt_ids[: len(r1.prompt_ids) + len(out1)] == r1.prompt_ids + out1
    h.echo(p2)
    h.conv.messages.append(Message(role="user", content="now the next task"))
    r3, _, _ = h.call("Sure.")
    assert r3.break_reason == "template_not_append_only" and r3.segment != r2.segment
    assert qwen3.decode(r3.prompt_ids) == qwen3.render_text(h.conv)


def test_fingerprints_tell_apart_text_moved_between_fields():
    """A fingerprint hashes each field's text with its length: moving text from the content to the reasoning
    (or a tool call's arguments into another field) is a different message; the tool call's id is not part
    of it (OpenClaw rewrites ids)."""
    base = Message(role="assistant", content="ab", reasoning="c")
    assert message_fingerprint(base) == message_fingerprint(Message(role="assistant", content="ab", reasoning="c"))
    assert message_fingerprint(base) != message_fingerprint(Message(role="assistant", content="a", reasoning="bc"))
    assert message_fingerprint(base) != message_fingerprint(Message(role="user", content="ab", reasoning="c"))
    call = ToolCall(id="x1", name="bash", arguments={"command": "ls"})
    with_call = Message(role="assistant", content="", tool_calls=[call])
    renamed = Message(role="assistant", content="", tool_calls=[call.model_copy(update={"id": "other"})])
    assert message_fingerprint(with_call) == message_fingerprint(renamed)
    assert message_fingerprint(with_call) != message_fingerprint(Message(role="assistant", content='[["bash"'))
