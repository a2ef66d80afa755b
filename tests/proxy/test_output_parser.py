"""Output parsing: sampled text → reasoning, text, tool calls; bad markup flagged, never raised."""

from __future__ import annotations

from openforge.core import ToolSpec
from openforge.proxy.output_parser import parse_output

BASH = ToolSpec(name="bash", parameters={"type": "object", "properties": {"command": {"type": "string"}}})
EDIT = ToolSpec(
    name="edit",
    parameters={"type": "object", "properties": {"path": {"type": "string"}, "line": {"type": "integer"}, "all": {"type": "boolean"}}},
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
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("bash", {"command": "ls -la"}), ("bash", {"command": "pwd"})]
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
    out = parse_output("<tool_call>\n<function=edit>\n<parameter=path>x</parameter>\n</tool_call>", tool_format="qwen3_coder")
    assert not out.tool_calls and out.parse_error
