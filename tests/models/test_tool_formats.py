"""Each model family's tool-call format, on replies written as the family's documentation and chat template
show them, read by the one output parser — whole, and streamed in pieces (the real templates and tokenizers are
exercised in test_model_families.py)."""

from __future__ import annotations

import pytest

from openforge.core import ToolSpec
from openforge.models.tool_formats import FORMATS, detect_tool_format, get_tool_format
from openforge.proxy.output_parser import OutputParser, parse_output

BASH = ToolSpec(name="bash", parameters={"type": "object", "properties": {"command": {"type": "string"}}})
EDIT = ToolSpec(
    name="edit",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "line": {"type": "integer"}, "all": {"type": "boolean"}},
    },
)
TOOLS = [BASH, EDIT]


def parse(fmt: str, text: str, tools=TOOLS):
    return parse_output(text, fmt, tools)


def calls(out):
    return [(c.name, c.arguments) for c in out.tool_calls]


# One reply per family: reasoning (where the family has it), text, and two calls.
CASES = {
    "json": (
        '<think>\nplan\n</think>\nLooking.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "edit", "arguments": {"path": "a.py", "line": 3}}\n</tool_call>'
    ),
    "qwen3_coder": (
        "<think>plan</think>Looking.\n<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n"
        "</function>\n</tool_call>\n<tool_call>\n<function=edit>\n<parameter=path>\na.py\n</parameter>\n"
        "<parameter=line>\n3\n</parameter>\n</function>\n</tool_call>"
    ),
    "llama3_json": '<|python_tag|>{"name": "bash", "parameters": {"command": "ls"}}; '
    '{"name": "edit", "parameters": {"path": "a.py", "line": 3}}',
    "mistral": '[THINK]plan[/THINK]Looking.[TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls"}, '
    '"id": "abcdefghi"}, {"name": "edit", "arguments": {"path": "a.py", "line": 3}}]',
    "deepseek_v3": (
        "<think>plan</think>Looking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n"
        '```json\n{"command": "ls"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>'
        'edit\n```json\n{"path": "a.py", "line": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    ),
    "glm45": (
        "<think>plan</think>Looking.<tool_call>bash\n<arg_key>command</arg_key>\n<arg_value>ls</arg_value>\n"
        "</tool_call><tool_call>edit\n<arg_key>path</arg_key>\n<arg_value>a.py</arg_value>\n<arg_key>line</arg_key>\n"
        "<arg_value>3</arg_value>\n</tool_call>"
    ),
    "kimi_k2": (
        "<think>plan</think>Looking.<|tool_calls_section_begin|><|tool_call_begin|>functions.bash:0"
        '<|tool_call_argument_begin|>{"command": "ls"}<|tool_call_end|><|tool_call_begin|>functions.edit:1'
        '<|tool_call_argument_begin|>{"path": "a.py", "line": 3}<|tool_call_end|><|tool_calls_section_end|>'
    ),
    "gpt_oss": (
        "<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>commentary<|message|>Looking."
        "<|end|><|start|>assistant<|channel|>commentary to=functions.bash <|constrain|>json<|message|>"
        '{"command": "ls"}<|end|><|start|>assistant to=functions.edit<|channel|>commentary json<|message|>'
        '{"path": "a.py", "line": 3}'
    ),
}
EXPECTED = [("bash", {"command": "ls"}), ("edit", {"path": "a.py", "line": 3})]


def test_every_registered_format_has_a_case():
    assert set(CASES) == set(FORMATS)


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_reasoning_text_and_two_calls(fmt):
    out = parse(fmt, CASES[fmt])
    assert calls(out) == EXPECTED, out
    assert out.parse_error is None
    assert len({c.id for c in out.tool_calls}) == 2
    if fmt != "llama3_json":  # Llama 3's JSON calls are the whole reply: no reasoning, no text
        assert out.reasoning == "plan" and out.content == "Looking."


@pytest.mark.parametrize("fmt", sorted(CASES))
@pytest.mark.parametrize("piece", [1, 3, 7])
def test_streamed_in_pieces_the_parse_is_the_whole_parse(fmt, piece):
    """What a harness is streamed and what is recorded are one parse, whatever the family and the split."""
    text = CASES[fmt]
    parser = OutputParser(fmt, TOOLS, reasoning=None)
    deltas = [d for i in range(0, len(text), piece) for d in parser.feed(text[i : i + piece])] + parser.close()
    streamed, whole = parser.output(), parse(fmt, text)
    assert calls(streamed) == calls(whole) == EXPECTED
    assert (streamed.reasoning, streamed.content, streamed.parse_error) == (whole.reasoning, whole.content, None)
    assert "".join(t for kind, t in deltas if kind == "text") == whole.content


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_plain_text_is_text(fmt):
    out = parse(fmt, "The answer is 42.")
    assert out.content == "The answer is 42." and not out.tool_calls and out.parse_error is None


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_unknown_tool_is_named(fmt):
    out = parse(fmt, CASES[fmt], tools=[BASH])
    assert out.parse_error == "tool 'edit' was not offered"


BROKEN = {
    "json": ('<tool_call>\n{"name": "bash", "arguments": {"command": "ls"\n</tool_call>', "not valid JSON"),
    "qwen3_coder": ("<tool_call>\n<function=bash>\n<parameter=command>ls</parameter>\n</tool_call>", "malformed"),
    "llama3_json": ('<|python_tag|>{"name": "bash", "parameters": {"command": ', "not valid JSON"),
    "mistral": ('[TOOL_CALLS]bash{"command": "ls"}', "neither a JSON list"),
    "deepseek_v3": (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{"command"',
        "is not closed",
    ),
    "glm45": ("<tool_call>bash\n<arg_key>command</arg_key>\n<arg_value>ls</arg_value>", "is not closed"),
    "kimi_k2": (
        '<|tool_calls_section_begin|><|tool_call_begin|>functions.bash:0<|tool_call_argument_begin|>{"c": 1}'
        "<|tool_calls_section_end|>",
        "is not closed",
    ),
    "gpt_oss": ('<|channel|>commentary to=functions.bash <|constrain|>json<|message|>{"command": ', "not valid JSON"),
}


@pytest.mark.parametrize("fmt", sorted(BROKEN))
def test_broken_markup_stays_text_and_is_named(fmt):
    text, why = BROKEN[fmt]
    out = parse(fmt, "Before. " + text)
    assert not out.tool_calls
    assert why in out.parse_error
    assert out.content.startswith("Before.")
    assert text.split("{")[0].strip()[:12] in out.content  # the markup is kept, not dropped


@pytest.mark.parametrize("call_id", ["", "functions.\nbash:0"])
def test_kimi_call_without_a_readable_id_stays_text_and_is_named(call_id):
    # the id is sampled text: one the format cannot read is a parse error, never a crash of the parser
    text = (
        f"<|tool_calls_section_begin|><|tool_call_begin|>{call_id}<|tool_call_argument_begin|>"
        '{"command": "ls"}<|tool_call_end|><|tool_calls_section_end|>'
    )
    out = parse("kimi_k2", "Before. " + text)
    assert not out.tool_calls
    assert "is not a call id" in out.parse_error
    assert out.content.startswith("Before.") and "<|tool_call_begin|>" in out.content


def test_typed_parameters_follow_the_schema():
    out = parse(
        "glm45",
        "<tool_call>edit\n<arg_key>path</arg_key>\n<arg_value>7</arg_value>\n<arg_key>all</arg_key>\n"
        "<arg_value>true</arg_value>\n</tool_call>",
    )
    assert calls(out) == [("edit", {"path": "7", "all": True})]


def test_mistral_v11_named_calls_with_and_without_ids():
    out = parse(
        "mistral", '[TOOL_CALLS]bash[ARGS]{"command": "ls"}[TOOL_CALLS]edit[CALL_ID]a1b2c3d4e[ARGS]{"path": "a"}'
    )
    assert calls(out) == [("bash", {"command": "ls"}), ("edit", {"path": "a"})]


def test_deepseek_v31_calls():
    out = parse(
        "deepseek_v3",
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>bash<｜tool▁sep｜>{"command": "ls"}'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    )
    assert calls(out) == [("bash", {"command": "ls"})]


def test_llama3_bare_json_reply_is_a_call_and_other_json_is_text():
    assert calls(parse("llama3_json", '{"name": "bash", "parameters": {"command": "ls"}}')) == [
        ("bash", {"command": "ls"})
    ]
    out = parse("llama3_json", '{"answer": 42}')
    assert out.content == '{"answer": 42}' and not out.tool_calls


def test_gpt_oss_final_channel_and_non_function_recipients():
    out = parse(
        "gpt_oss", "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>Done."
    )
    assert (out.reasoning, out.content, out.tool_calls) == ("think", "Done.", [])
    out = parse("gpt_oss", '<|channel|>analysis to=browser.search<|message|>{"q": 1}<|call|>')
    assert "only functions.* tools" in out.parse_error


@pytest.mark.parametrize(
    ("template", "fmt"),
    [
        ("{{ '<tool_call>' }}{{ tool_call | tojson }}", "json"),
        ("<tool_call>\n<function={{ name }}>", "qwen3_coder"),
        ("<|start_header_id|>ipython<|end_header_id|>{{ '<|python_tag|>' }}", "llama3_json"),
        ("[AVAILABLE_TOOLS]{{ tools }}[TOOL_CALLS]", "mistral"),
        ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>", "deepseek_v3"),
        ("<tool_call>{{ name }}<arg_key>{{ k }}</arg_key>", "glm45"),
        ("<|tool_calls_section_begin|>", "kimi_k2"),
        ("<|start|>assistant<|channel|>final<|message|>", "gpt_oss"),
        ("{{ messages }}", "json"),
    ],
)
def test_detected_from_the_chat_template(template, fmt):
    assert detect_tool_format(template).name == fmt


def test_unknown_format_name():
    with pytest.raises(ValueError, match="known: deepseek_v3"):
        get_tool_format("nope")
