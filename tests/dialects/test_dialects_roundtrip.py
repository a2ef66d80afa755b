"""Property tests: random multi-turn conversations survive wire → canonical → wire → canonical in every
dialect; random replies stream and encode to the same content (accumulated with the SDKs' own
accumulators); and a reply sent back by the harness as history decodes to exactly what the model said."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openforge.core import Conversation, FinishReason, Message, ParsedOutput, SamplingParams, ToolCall, ToolSpec
from openforge.dialects import DIALECTS, Reply
from support.dialects import accumulate, project, validate_body

A, R, C = "anthropic", "responses", "chat_completions"
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)  # lone surrogates are not UTF-8
NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,10}", fullmatch=True)
JSON_LEAF = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False) | TEXT
)
JSON_VALUE = st.recursive(
    JSON_LEAF, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(TEXT, kids, max_size=3), max_leaves=8
)
ARGUMENTS = st.dictionaries(TEXT, JSON_VALUE, max_size=4)


@st.composite
def conversations(draw, dialect: str) -> Conversation:
    """A conversation in the form `dialect` can carry: no two assistant turns in a row (Responses
    items would merge them), `is_error` only where the wire has it, sampling fields the wire has."""
    tool_names = draw(st.lists(NAMES, max_size=3, unique=True))
    tools = [
        ToolSpec(
            name=n,
            description=draw(TEXT),
            parameters={"type": "object", "properties": {draw(NAMES): {"type": "string"}}},
        )
        for n in tool_names
    ]
    messages: list[Message] = []
    next_call = 0
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["user", "system", "assistant"]))
        if kind == "assistant" and messages and messages[-1].role == "assistant":
            kind = "user"
        if kind != "assistant":
            messages.append(Message(role=kind, content=draw(TEXT)))
            continue
        calls = []
        for _ in range(draw(st.integers(0, 2))):
            calls.append(
                ToolCall(
                    id=f"call_{next_call}",
                    name=draw(st.sampled_from(tool_names) if tool_names else NAMES),
                    arguments=draw(ARGUMENTS),
                )
            )
            next_call += 1
        messages.append(
            Message(role="assistant", reasoning=draw(st.none() | TEXT), content=draw(TEXT), tool_calls=calls)
        )
        for call in calls:
            is_error = draw(st.booleans()) if dialect == A else False
            messages.append(
                Message(role="tool", tool_call_id=call.id, name=call.name, content=draw(TEXT), is_error=is_error)
            )
    sampling = SamplingParams(
        temperature=draw(st.floats(0, 1 if dialect == A else 2)),  # each API's documented range
        top_p=draw(st.floats(0.01, 1)),
        top_k=draw(st.integers(0, 50)) if dialect != R else 0,
        max_tokens=draw(st.integers(1, 200_000)),
        stop=draw(st.lists(TEXT.filter(bool), max_size=2)) if dialect != R else [],
        seed=draw(st.none() | st.integers(0, 2**31)) if dialect == C else None,
    )
    return Conversation(
        system=draw(st.none() | TEXT),
        messages=messages,
        tools=tools,
        sampling=sampling,
        response_format=draw(st.none() | st.just({"type": "object", "properties": {"a": {"type": "integer"}}})),
        model="m",
    )


def expected(dialect: str, conversation: Conversation) -> Conversation:
    """What decoding can recover: Chat Completions has no system field, so a leading system message is it."""
    if (
        dialect == C
        and conversation.system is None
        and conversation.messages
        and conversation.messages[0].role == "system"
    ):
        return conversation.model_copy(
            update={"system": conversation.messages[0].content, "messages": conversation.messages[1:]}
        )
    return conversation


def wire_round_trip(dialect: str, conversation: Conversation, stream: bool) -> Conversation:
    d = DIALECTS[dialect]
    body = json.dumps(d.encode_request(conversation, model="m", stream=stream), ensure_ascii=stream).encode()
    decoded = d.decode(body)
    assert decoded.stream is stream and decoded.side_call is (not conversation.tools)
    return decoded.conversation


def _conversation_round_trip(dialect: str, conversation: Conversation) -> None:
    once = wire_round_trip(dialect, conversation, stream=False)
    assert once == expected(dialect, conversation)
    assert wire_round_trip(dialect, once, stream=True) == once


@SETTINGS
@given(conversations(A))
def test_anthropic_conversations_round_trip(conversation):
    _conversation_round_trip(A, conversation)


@SETTINGS
@given(conversations(R))
def test_responses_conversations_round_trip(conversation):
    _conversation_round_trip(R, conversation)


@SETTINGS
@given(conversations(C))
def test_chat_conversations_round_trip(conversation):
    _conversation_round_trip(C, conversation)


# ---- replies --------------------------------------------------------------------------------------------

REQUEST_TOOLS = ["alpha", "beta", "ns.gamma"]  # ns.gamma: a Responses namespace tool, flattened


def reply_request(dialect: str):
    schema = {"type": "object", "properties": {}}
    if dialect == A:
        body = {
            "model": "m",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": n, "input_schema": schema} for n in REQUEST_TOOLS],
        }
    elif dialect == R:
        body = {
            "model": "m",
            "input": [{"role": "user", "content": "hi"}],
            "tools": [
                {"type": "function", "name": "alpha", "parameters": schema},
                {"type": "function", "name": "beta"},
                {
                    "type": "namespace",
                    "name": "ns",
                    "description": "",
                    "tools": [{"type": "function", "name": "gamma"}],
                },
            ],
        }
    else:
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "stream_options": {"include_usage": True},
            "stream": True,
            "tools": [{"type": "function", "function": {"name": n, "parameters": schema}} for n in REQUEST_TOOLS],
        }
    return body, DIALECTS[dialect].decode(json.dumps(body).encode())


@st.composite
def replies(draw) -> Reply:
    calls = [
        ToolCall(id=f"call_{i}", name=draw(st.sampled_from(REQUEST_TOOLS)), arguments=draw(ARGUMENTS))
        for i in range(draw(st.integers(0, 3)))
    ]
    output = ParsedOutput(reasoning=draw(st.none() | TEXT), content=draw(TEXT), tool_calls=calls)
    prompt, completion = draw(st.integers(0, 10**6)), draw(st.integers(0, 10**5))
    return Reply(
        id=f"reply_{draw(st.integers(0, 10**9))}",
        model="m",
        output=output,
        finish_reason=draw(st.sampled_from([FinishReason.stop, FinishReason.length])),
        prompt_tokens=prompt,
        completion_tokens=completion,
        created=draw(st.integers(0, 2**31)),
    )


def history_with(dialect: str, request_body: dict, response: dict) -> bytes:
    """The next request a harness sends: the history plus the reply, as the API gave it."""
    body = dict(request_body)
    if dialect == A:
        body["messages"] = [*body["messages"], {"role": "assistant", "content": response["content"]}]
    elif dialect == R:
        body["input"] = [*body["input"], *response["output"]]
    else:
        body["messages"] = [*body["messages"], response["choices"][0]["message"]]
    return json.dumps(body).encode()


@pytest.mark.parametrize("dialect", [A, R, C])
@SETTINGS
@given(reply=replies(), chunk_chars=st.none() | st.integers(1, 12))
def test_replies_stream_as_they_encode_and_come_back_unchanged(dialect, reply, chunk_chars):
    d = DIALECTS[dialect]
    request_body, request = reply_request(dialect)
    body = d.encode(reply, request)
    validate_body(dialect, body)
    chunks = d.stream(reply, request, chunk_chars=chunk_chars)
    assert project(dialect, accumulate(dialect, chunks)) == project(dialect, body)

    returned = d.decode(history_with(dialect, request_body, body)).conversation.messages[-1]
    out = reply.output
    assert returned == Message(
        role="assistant", reasoning=out.reasoning, content=out.content, tool_calls=out.tool_calls
    )
