"""Output parsing: sampled text → reasoning, text, tool calls; bad markup flagged, never raised."""

from __future__ import annotations

from openforge.core import ToolSpec
from openforge.proxy.output_parser import parse_output

BASH = ToolSpec(name="bash", parameters={"type": "object", "properties": {"command": {"type": "string"}}})
EDIT = ToolSpec(
    name="edit",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "line": {"type": "integer"}, "all": {"type": "boolean"}},
    },
)


def test_plain_text():
    out = parse_output("Hello there.")
    assert out.content == "Hello there." and not out.tool_calls and out.parse_error is None


def test_json_tool_calls_reasoning_and_text():
    text = (
        "<think>\nI need ls.\n</think>\nLet me look.\n"
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "bash", "arguments": "{\\"command\\": \\"pwd\\"}"}\n</tool_call>'
    )
    out = parse_output(text, tools=[BASH])
    assert out.reasoning == "I need ls."
    assert out.content == "Let me look."
    assert [(c.name, c.arguments) for c in out.tool_calls] == [
        ("bash", {"command": "ls -la"}),
        ("bash", {"command": "pwd"}),
    ]
    assert len({c.id for c in out.tool_calls}) == 2
    assert out.parse_error is None


def test_reasoning_without_opening_tag():
    out = parse_output("thinking...</think>answer")
    assert out.reasoning == "thinking..." and out.content == "answer"


def test_unparseable_tool_call_stays_text_and_is_flagged():
    text = 'ok <tool_call>\n{"name": "bash", "arguments": {"command": \n</tool_call> done'
    out = parse_output(text, tools=[BASH])
    assert not out.tool_calls
    assert "<tool_call>" in out.content and out.content.endswith("done")
    assert "not valid JSON" in out.parse_error


def test_unclosed_and_nameless_calls_flagged():
    assert "not closed" in parse_output('<tool_call>{"name": "bash"').parse_error
    assert '"name"' in parse_output('<tool_call>{"arguments": {}}</tool_call>').parse_error
    assert "JSON object" in parse_output('<tool_call>{"name": "x", "arguments": [1]}</tool_call>').parse_error


def test_unknown_tool_is_returned_but_flagged():
    out = parse_output('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', tools=[BASH])
    assert out.tool_calls[0].name == "rm_rf"
    assert "not offered" in out.parse_error


def test_qwen3_coder_format_with_typed_parameters():
    text = (
        "I'll edit.\n<tool_call>\n<function=edit>\n<parameter=path>\nsrc/a.py\n</parameter>\n"
        "<parameter=line>\n42\n</parameter>\n<parameter=all>\ntrue\n</parameter>\n</function>\n</tool_call>"
    )
    out = parse_output(text, tool_format="qwen3_coder", tools=[EDIT])
    assert out.content == "I'll edit."
    assert out.tool_calls[0].name == "edit"
    assert out.tool_calls[0].arguments == {"path": "src/a.py", "line": 42, "all": True}


def test_qwen3_coder_malformed_function_is_flagged():
    out = parse_output(
        "<tool_call>\n<function=edit>\n<parameter=path>x</parameter>\n</tool_call>", tool_format="qwen3_coder"
    )
    assert not out.tool_calls and out.parse_error


# ---- incremental parsing: what a stream releases is the parse ---------------------------------------------
import random  # noqa: E402

from openforge.proxy.output_parser import OutputParser, prompt_opens_reasoning  # noqa: E402

PIECES = [
    "<think>",
    "</think>",
    "\n",
    " ",
    "  \n",
    "abc",
    "x y",
    "<tool_call>",
    "</tool_call>",
    '{"name": "bash", "arguments": {"command": "ls"}}',
    '{"bad',
    "<",
    "</",
    "<tool_",
    "</thi",
    "\t",
    "Z",
]


def stream(text: str, reasoning, rng: random.Random, tools=None):
    parser = OutputParser(tools=tools, reasoning=reasoning)
    deltas, i = [], 0
    while i < len(text):
        j = i + rng.randint(1, 6)
        deltas += parser.feed(text[i:j])
        i = j
    deltas += parser.close()
    return deltas, parser.output()


def summary(out):
    return out.reasoning, out.content, [(c.name, c.arguments) for c in out.tool_calls], out.parse_error


def test_streamed_in_any_split_the_parse_is_the_whole_parse_and_the_deltas_are_the_parse():
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        whole = parse_output(text, tools=[BASH])
        for reasoning in ("</think>" in text, None):  # a whole reply's rule, a stream's rule
            deltas, out = stream(text, reasoning, rng, tools=[BASH])
            if reasoning is not None:
                assert summary(out) == summary(whole), text
            assert "".join(d for kind, d in deltas if kind == "text") == out.content, text
            assert "".join(d for kind, d in deltas if kind == "reasoning") == (out.reasoning or ""), text
            assert (out.reasoning is not None) == any(kind == "reasoning" for kind, _ in deltas), text


def test_tool_call_markup_is_held_until_it_closes_then_the_call_goes_out_with_the_reply():
    parser = OutputParser(tools=[BASH])
    assert parser.feed("Let me look.\n") == [("text", "Let me look.")]
    assert parser.feed('<tool_call>\n{"name": "bash", "arguments": {"comm') == []
    assert parser.feed('and": "ls"}}\n</tool_call>') == []
    assert parser.close() == []
    out = parser.output()
    assert out.content == "Let me look." and out.tool_calls[0].arguments == {"command": "ls"} and not out.parse_error


def test_unparseable_tool_call_is_released_as_text_when_it_closes_and_flagged():
    parser = OutputParser(tools=[BASH])
    assert parser.feed("ok ") == [("text", "ok")]
    assert parser.feed('<tool_call>{"name": "bash", "arguments": {"command": ') == []
    released = parser.feed("</tool_call> then")
    assert released == [
        ("text", ' <tool_call>{"name": "bash", "arguments": {"command": </tool_call>'),
        ("text", " then"),
    ]
    parser.close()
    out = parser.output()
    assert not out.tool_calls and "not valid JSON" in out.parse_error
    assert out.content == 'ok <tool_call>{"name": "bash", "arguments": {"command": </tool_call> then'


def test_stream_reasoning_rules():
    # the prompt opened the reasoning: the reply starts inside it
    assert prompt_opens_reasoning("<|im_start|>assistant\n<think>\n")
    parser = OutputParser(reasoning=True)
    assert parser.feed("\nplan") == [("reasoning", ""), ("reasoning", "plan")]
    assert parser.feed("\n\n</think>\n\nanswer\n") == [("text", "answer")]
    parser.close()
    assert summary(parser.output()) == ("plan", "answer", [], None)
    # a reply cut off while thinking: what it wrote is reasoning
    parser = OutputParser(reasoning=None)
    parser.feed("<think>\nstill thinking")
    parser.close()
    assert summary(parser.output()) == ("still thinking", "", [], None)
    # a stray `</think>` in a streamed reply that did not start in reasoning stays text
    parser = OutputParser(reasoning=None)
    parser.feed("text </think> more")
    parser.close()
    assert summary(parser.output()) == (None, "text </think> more", [], None)


def test_unclosed_tool_call_at_the_end_is_text_and_flagged():
    parser = OutputParser()
    assert parser.feed('done <tool_call>{"name": "bash"') == [("text", "done")]
    assert parser.close() == [("text", ' <tool_call>{"name": "bash"')]
    assert "not closed" in parser.output().parse_error
