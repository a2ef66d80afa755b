"""A corpus of malformed and hostile request bodies: each decoder answers a 4xx `DialectError` whose message
names the problem — never another exception, never a hang."""

from __future__ import annotations

import json

import pytest

from openforge.dialects import DIALECTS, DialectError

A, R, C = "anthropic", "responses", "chat_completions"


def j(value) -> bytes:
    return json.dumps(value).encode()


def anthropic(**overrides) -> bytes:
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], **overrides}
    return j({k: v for k, v in body.items() if v is not ...})


def responses(**overrides) -> bytes:
    body = {"model": "m", "input": "hi", **overrides}
    return j({k: v for k, v in body.items() if v is not ...})


def chat(**overrides) -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **overrides}
    return j({k: v for k, v in body.items() if v is not ...})


def deep(levels: int) -> bytes:
    return b'{"model": "m", "x": ' + b"[" * levels + b"]" * levels + b"}"


def deep_arguments(levels: int) -> str:
    return "{" + '"a":{' * levels + "}" * levels + "}"


def assistant_call(call_id="toolu_1", name="Bash", arguments=None):
    return {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": call_id,
                "name": name,
                "input": arguments if arguments is not None else {"command": "ls"},
            }
        ],
    }


def chat_call(call_id="call_1", arguments='{"cmd":"ls"}'):
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "exec", "arguments": arguments}}],
    }


def fc(call_id="call_1", arguments='{"cmd":"ls"}', **extra):
    return {"type": "function_call", "call_id": call_id, "name": "exec", "arguments": arguments, **extra}


BOTH = (A, R, C)

# (dialects, body, words the error message must contain)
CASES: list[tuple[tuple[str, ...], bytes, str]] = [
    # ---- the body itself ----
    (BOTH, b"", "empty"),
    (BOTH, b"   \n", "empty"),
    (BOTH, b"{not json", "not valid JSON"),
    (BOTH, b'{"model": "m",}', "not valid JSON"),
    (BOTH, b'{"model": "m"', "not valid JSON"),
    (BOTH, b'\xff\xfe{"model": "m"}', "not valid UTF-8"),
    (BOTH, b'{"model": "\xc3\x28"}', "not valid UTF-8"),
    (BOTH, b"[1, 2, 3]", "must be a JSON object"),
    (BOTH, b'"a string"', "must be a JSON object"),
    (BOTH, b"null", "must be a JSON object"),
    (BOTH, b'{"model": "m", "temperature": NaN}', "NaN"),
    (BOTH, b'{"model": "m", "max_tokens": Infinity}', "Infinity"),
    (BOTH, deep(100_000), "too deeply"),
    (BOTH, b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "too deeply"),
    # ---- model ----
    ((A,), anthropic(model=...), "model: is required"),
    ((R,), responses(model=...), "model: is required"),
    ((C,), chat(model=...), "model: is required"),
    ((A,), anthropic(model=42), "model: expected a string"),
    ((C,), chat(model=""), "model: must not be empty"),
    # ---- Anthropic Messages ----
    ((A,), anthropic(max_tokens=...), "max_tokens: is required"),
    ((A,), anthropic(max_tokens="100"), "max_tokens: expected an integer"),
    ((A,), anthropic(max_tokens=0), "max_tokens: must be at least 1"),
    ((A,), anthropic(max_tokens=True), "max_tokens: expected an integer"),
    ((A,), anthropic(messages=...), "messages: is required"),
    ((A,), anthropic(messages=[]), "messages: must contain at least one message"),
    ((A,), anthropic(messages={"role": "user"}), "messages: expected an array"),
    ((A,), anthropic(messages=["hi"]), "messages[0]: expected an object"),
    ((A,), anthropic(messages=[{"role": "user"}]), "messages[0].content: is required"),
    ((A,), anthropic(messages=[{"role": "robot", "content": "x"}]), "messages[0].role: must be"),
    ((A,), anthropic(messages=[{"content": "x"}]), "messages[0].role: is required"),
    ((A,), anthropic(messages=[{"role": "user", "content": 5}]), "messages[0].content: expected a string or an array"),
    (
        (A,),
        anthropic(messages=[{"role": "user", "content": [{"text": "x"}]}]),
        "messages[0].content[0].type: is required",
    ),
    (
        (A,),
        anthropic(messages=[{"role": "user", "content": [{"type": "text"}]}]),
        "messages[0].content[0].text: is required",
    ),
    (
        (A,),
        anthropic(messages=[{"role": "user", "content": [{"type": "video"}]}]),
        "unsupported content block type 'video'",
    ),
    (
        (A,),
        anthropic(
            messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}]}]
        ),
        "unknown tool call id",
    ),
    (
        (A,),
        anthropic(messages=[{"role": "user", "content": [{"type": "tool_result", "content": "r"}]}]),
        "tool_use_id: is required",
    ),
    (
        (A,),
        anthropic(
            messages=[
                assistant_call(),
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "r"}]},
            ]
        ),
        "toolu_2",
    ),
    (
        (A,),
        anthropic(
            messages=[
                assistant_call(),
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"},
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"},
                    ],
                },
            ]
        ),
        "already has a result",
    ),
    ((A,), anthropic(messages=[assistant_call(), assistant_call()]), "used more than once"),
    ((A,), anthropic(messages=[assistant_call(arguments="ls")]), "input: expected an object"),
    (
        (A,),
        anthropic(messages=[{"role": "assistant", "content": [{"type": "tool_use", "name": "Bash", "input": {}}]}]),
        "id: is required",
    ),
    (
        (A,),
        anthropic(messages=[{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]}]),
        "name: is required",
    ),
    (
        (A,),
        anthropic(messages=[{"role": "assistant", "content": [{"type": "image"}]}]),
        "unsupported content block type 'image' in an assistant",
    ),
    (
        (A,),
        anthropic(messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 7}]}]),
        "content: expected a string or an array",
    ),
    (
        (A,),
        anthropic(messages=[assistant_call(arguments=json.loads(deep_arguments(150)))]),
        "nests deeper than 100 levels",
    ),
    ((A,), anthropic(system=12), "system: expected a string or an array"),
    ((A,), anthropic(system=[{"type": "image"}]), "system[0].type: expected a text block"),
    ((A,), anthropic(tools={"name": "x"}), "tools: expected an array"),
    ((A,), anthropic(tools=[{"name": "Bash"}]), "tools[0].input_schema: is required"),
    ((A,), anthropic(tools=[{"input_schema": {}}]), "tools[0].name: is required"),
    ((A,), anthropic(tools=[{"name": "x", "input_schema": "object"}]), "input_schema: expected an object"),
    (
        (A,),
        anthropic(tools=[{"name": "x", "input_schema": {}}, {"name": "x", "input_schema": {}}]),
        "used more than once",
    ),
    ((A,), anthropic(tool_choice={"type": "sometimes"}), "tool_choice.type: must be"),
    ((A,), anthropic(tool_choice={"type": "tool", "name": "ghost"}), "names no tool"),
    ((A,), anthropic(temperature="hot"), "temperature: expected a number"),
    ((A,), anthropic(temperature=-1), "temperature: must be between"),
    ((A,), anthropic(top_p=1.5), "top_p: must be between"),
    # the ranges the real APIs document (see the dialects' comments for the sources)
    ((A,), anthropic(temperature=1.5), "temperature: must be between 0.0 and 1.0"),
    (
        (A,),
        anthropic(thinking={"type": "enabled", "budget_tokens": 1000}),
        "thinking.budget_tokens: must be at least 1024",
    ),
    (
        (A,),
        anthropic(max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 2000}),
        "thinking.budget_tokens: must be less than max_tokens",
    ),
    ((A,), anthropic(thinking={"type": "enabled"}), "thinking.budget_tokens: is required"),
    ((A,), anthropic(thinking={"type": "deep"}), "thinking.type: must be"),
    (
        (A,),
        anthropic(max_tokens=4000, thinking={"type": "adaptive"}, temperature=0.5),
        "temperature: may only be set to 1",
    ),
    (
        (A,),
        anthropic(max_tokens=4000, thinking={"type": "enabled", "budget_tokens": 1024}, top_k=5),
        "top_k: cannot be set",
    ),
    ((A,), anthropic(max_tokens=4000, thinking={"type": "adaptive"}, top_p=0.5), "top_p: must be between 0.95 and 1"),
    (
        (A,),
        anthropic(thinking={"type": "adaptive"}, tool_choice={"type": "any"}),
        "tool_choice: thinking cannot be used",
    ),
    ((A,), anthropic(output_config={"effort": "extreme"}), "output_config.effort: must be one of"),
    ((A,), anthropic(top_k=-3), "top_k: must be at least 0"),
    ((A,), anthropic(stop_sequences="STOP"), "stop_sequences: expected an array"),
    ((A,), anthropic(stop_sequences=["ok", 3]), "stop_sequences[1]: expected a string"),
    ((A,), anthropic(stop_sequences=[""]), "must not be empty"),
    ((A,), anthropic(stream="yes"), "stream: expected true or false"),
    ((A,), anthropic(output_config={"format": {"type": "regex"}}), "output_config.format.type"),
    (
        (A,),
        anthropic(output_config={"format": {"type": "json_schema"}}),
        "output_config.format.schema: expected an object",
    ),
    # ---- OpenAI Responses ----
    ((R,), responses(input=...), "input: is required"),
    ((R,), responses(input=[]), "input: must contain at least one item"),
    ((R,), responses(input=42), "input: expected a string or an array"),
    ((R,), responses(previous_response_id="resp_1"), "previous_response_id: is not supported"),
    ((R,), responses(conversation="conv_1"), "conversation: is not supported"),
    ((R,), responses(input=[{"role": "user"}]), "input[0].content: is required"),
    ((R,), responses(input=[{"role": "critic", "content": "x"}]), "input[0].role: must be"),
    ((R,), responses(input=[{"type": "message", "content": "x"}]), "input[0].role: is required"),
    (
        (R,),
        responses(input=[{"role": "user", "content": [{"type": "input_video"}]}]),
        "unsupported content part type 'input_video'",
    ),
    ((R,), responses(input=[{"type": "telepathy"}]), "unsupported input item type 'telepathy'"),
    ((R,), responses(input=[{"type": "item_reference", "id": "msg_1"}]), "item_reference"),
    (
        (R,),
        responses(input=[{"type": "function_call_output", "call_id": "call_9", "output": "x"}]),
        "unknown tool call id",
    ),
    (
        (R,),
        responses(input=[fc(), {"type": "function_call_output", "call_id": "call_1"}]),
        "input[1].output: is required",
    ),
    ((R,), responses(input=[fc(arguments="{not json")]), "arguments are not valid JSON"),
    ((R,), responses(input=[fc(arguments="[1, 2]")]), "arguments must be a JSON object"),
    ((R,), responses(input=[fc(arguments={"cmd": "ls"})]), "arguments: expected a JSON string"),
    ((R,), responses(input=[fc(arguments=deep_arguments(120))]), "nests deeper than 100 levels"),
    ((R,), responses(input=[fc(arguments="[" * 100_000)]), "too deeply"),
    ((R,), responses(input=[fc(), fc()]), "used more than once"),
    (
        (R,),
        responses(input=[{"type": "function_call", "name": "exec", "arguments": "{}"}]),
        "input[0].call_id: is required",
    ),
    (
        (R,),
        responses(input=[{"type": "reasoning", "summary": [], "encrypted_content": "openforge:v1:!!!"}]),
        "encrypted_content",
    ),
    ((R,), responses(tools=[{"name": "exec"}]), "tools[0].type: is required"),
    ((R,), responses(tools=[{"type": "function"}]), "tools[0].name: is required"),
    (
        (R,),
        responses(tools=[{"type": "function", "name": "x", "parameters": "none"}]),
        "parameters: expected an object",
    ),
    ((R,), responses(tools=[{"type": "namespace", "tools": []}]), "tools[0].name: is required"),
    (
        (R,),
        responses(tools=[{"type": "namespace", "name": "ns", "tools": [{"type": "function"}]}]),
        "tools[0].tools[0].name: is required",
    ),
    ((R,), responses(tool_choice="always"), "tool_choice: must be"),
    ((R,), responses(tool_choice={"type": "function", "name": "ghost"}), "names no tool"),
    ((R,), responses(max_output_tokens=-5), "max_output_tokens: must be at least 1"),
    ((R,), responses(temperature=3), "temperature: must be between"),
    ((R,), responses(reasoning={"effort": "extreme"}), "reasoning.effort: must be one of"),
    ((R,), responses(reasoning={"summary": "long"}), "reasoning.summary: must be one of"),
    ((R,), responses(top_logprobs=21), "top_logprobs: must be between 0 and 20"),
    ((R,), responses(text={"format": {"type": "yaml"}}), "text.format.type"),
    # ---- OpenAI Chat Completions ----
    ((C,), chat(messages=...), "messages: is required"),
    ((C,), chat(temperature=2.5), "temperature: must be between 0.0 and 2.0"),
    ((C,), chat(reasoning_effort="extreme"), "reasoning_effort: must be one of"),
    ((C,), chat(presence_penalty=3), "presence_penalty: must be between"),
    ((C,), chat(frequency_penalty=-2.5), "frequency_penalty: must be between"),
    ((C,), chat(top_logprobs=30), "top_logprobs: must be between 0 and 20"),
    ((C,), chat(messages=[]), "must contain at least one message"),
    ((C,), chat(messages=[{"role": "user"}]), "messages[0].content: is required"),
    (
        (C,),
        chat(messages=[{"role": "user", "content": {"text": "x"}}]),
        "messages[0].content: expected a string or an array",
    ),
    (
        (C,),
        chat(messages=[{"role": "user", "content": [{"type": "text"}]}]),
        "messages[0].content[0].text: is required",
    ),
    (
        (C,),
        chat(messages=[{"role": "user", "content": [{"type": "hologram"}]}]),
        "unsupported content part type 'hologram'",
    ),
    ((C,), chat(messages=[{"role": "wizard", "content": "x"}]), "messages[0].role: must be"),
    ((C,), chat(messages=[{"role": "function", "name": "f", "content": "x"}]), "legacy 'function' messages"),
    ((C,), chat(functions=[{"name": "f"}]), "legacy function calling"),
    ((C,), chat(messages=[{"role": "tool", "tool_call_id": "call_zz", "content": "r"}]), "unknown tool call id"),
    ((C,), chat(messages=[{"role": "tool", "content": "r"}]), "messages[0].tool_call_id: is required"),
    (
        (C,),
        chat(
            messages=[
                chat_call(),
                {"role": "tool", "tool_call_id": "call_1", "content": "r"},
                {"role": "tool", "tool_call_id": "call_1", "content": "r"},
            ]
        ),
        "already has a result",
    ),
    (
        (C,),
        chat(messages=[chat_call(arguments="{'cmd': 'ls'}")]),
        "messages[0].tool_calls[0].function.arguments: arguments are not valid JSON",
    ),
    ((C,), chat(messages=[chat_call(arguments='"ls"')]), "arguments must be a JSON object"),
    ((C,), chat(messages=[chat_call(arguments=17)]), "arguments: expected a JSON string"),
    (
        (C,),
        chat(messages=[{"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}]),
        "function: expected an object",
    ),
    (
        (C,),
        chat(
            messages=[
                {
                    "role": "assistant",
                    "tool_calls": [{"type": "function", "function": {"name": "x", "arguments": "{}"}}],
                }
            ]
        ),
        "tool_calls[0].id: is required",
    ),
    ((C,), chat(messages=[{"role": "assistant", "tool_calls": "none"}]), "tool_calls: expected an array"),
    (
        (C,),
        chat(messages=[{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}]),
        "legacy function calling",
    ),
    ((C,), chat(n=3), "only one choice"),
    ((C,), chat(stop=[1]), "stop[0]: expected a string"),
    ((C,), chat(max_tokens=0), "max_tokens: must be at least 1"),
    ((C,), chat(max_completion_tokens="lots"), "max_completion_tokens: expected an integer"),
    ((C,), chat(seed=1.5), "seed: expected an integer"),
    ((C,), chat(stream_options="yes"), "stream_options: expected an object"),
    ((C,), chat(tools=[{"type": "function"}]), "tools[0].function: expected an object"),
    ((C,), chat(tools=[{"type": "function", "function": {"description": "x"}}]), "tools[0].function.name: is required"),
    ((C,), chat(tool_choice={"type": "function", "function": {"name": "ghost"}}), "names no tool"),
    ((C,), chat(response_format={"type": "xml"}), "response_format.type"),
    ((C,), chat(response_format={"type": "json_schema"}), "response_format.json_schema: expected an object"),
]


def _cases():
    for dialects, body, words in CASES:
        for dialect in dialects:
            yield pytest.param(dialect, body, words, id=f"{dialect}:{words[:40]}")


def test_corpus_is_large():
    assert sum(len(d) for d, _, _ in CASES) >= 100


@pytest.mark.timeout(30)
@pytest.mark.parametrize("dialect,body,words", list(_cases()))
def test_malformed_request_is_a_named_4xx(dialect, body, words):
    with pytest.raises(DialectError) as info:
        DIALECTS[dialect].decode(body)
    err = info.value
    assert 400 <= err.status < 500 and err.kind == "invalid_request"
    assert words in err.message, err.message
    status, payload = DIALECTS[dialect].error(err)
    assert status == 400
    assert words in json.dumps(payload, ensure_ascii=False) or words in err.message


def test_param_names_the_field():
    with pytest.raises(DialectError) as info:
        DIALECTS["chat_completions"].decode(
            chat(messages=[{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "r"}])
        )
    assert info.value.param == "messages[1].tool_call_id"
    _, body = DIALECTS["chat_completions"].error(info.value)
    assert body["error"]["param"] == "messages[1].tool_call_id"


def test_lone_surrogates_are_replaced_not_fatal():
    body = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a\\ud800b \\ud83d\\ude00"}]}'
    message = DIALECTS["anthropic"].decode(body).conversation.messages[0]
    assert message.content == "a\ufffdb \U0001f600"
    message.content.encode("utf-8")  # the renderer and store can encode it


def test_a_byte_order_mark_is_tolerated():
    body = "\ufeff".encode() + chat()
    assert DIALECTS["chat_completions"].decode(body).model == "m"


def test_null_optional_fields_count_as_absent():
    body = chat(temperature=None, top_p=None, stop=None, tools=None, max_tokens=None, stream=None, seed=None)
    decoded = DIALECTS["chat_completions"].decode(body)
    assert decoded.conversation.sampling.temperature == 1.0 and not decoded.stream


def test_unanswered_tool_calls_are_allowed():
    # A harness interrupted mid-turn may send a call without its result; the renderer decides what to show.
    decoded = DIALECTS["anthropic"].decode(anthropic(messages=[{"role": "user", "content": "x"}, assistant_call()]))
    assert decoded.conversation.messages[-1].tool_calls[0].id == "toolu_1"
