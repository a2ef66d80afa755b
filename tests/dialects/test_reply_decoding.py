"""Replies read back (`Dialect.decode_reply`, what the upstream teacher backend uses): every reply a dialect
encodes decodes to the same reasoning, text, tool calls, finish reason and usage; bodies as real APIs write
them (extra fields, null content beside tool calls) decode; a malformed body names the field at fault."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openforge.core import FinishReason, ParsedOutput, ToolCall
from openforge.dialects import DIALECTS, DialectError, Reply
from support.dialects import SCENARIOS, canned_reply, request_for

READABLE = ["anthropic", "chat_completions"]
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)


@pytest.mark.parametrize("dialect", READABLE)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_encoded_reply_decodes_to_what_it_said(dialect, scenario):
    d = DIALECTS[dialect]
    reply = canned_reply(dialect, scenario)
    body = d.encode(reply, request_for(dialect))
    for form in (body, json.dumps(body).encode()):
        decoded = d.decode_reply(form)
        assert decoded.output == reply.output
        assert decoded.finish_reason == reply.finish_reason
        assert (decoded.prompt_tokens, decoded.completion_tokens) == (123, 45)
        assert decoded.model == "test-model"


@pytest.mark.parametrize("dialect", READABLE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reasoning=st.none() | TEXT, content=TEXT, command=TEXT)
def test_random_replies_round_trip(dialect, reasoning, content, command):
    d = DIALECTS[dialect]
    call = ToolCall(id=d.new_call_id(), name="exec", arguments={"cmd": command})
    output = ParsedOutput(reasoning=reasoning, content=content, tool_calls=[call])
    reply = Reply(
        id=d.new_reply_id(),
        model="m",
        output=output,
        finish_reason=FinishReason.stop,
        prompt_tokens=1,
        completion_tokens=2,
        created=0,
    )
    assert d.decode_reply(d.encode(reply, request_for(dialect))).output == output


def test_a_provider_style_chat_body_decodes():
    body = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 1,
        "model": "kimi",
        "service_tier": None,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "annotations": [],
                    "reasoning_content": "list first",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
    }
    decoded = DIALECTS["chat_completions"].decode_reply(body)
    assert decoded.output == ParsedOutput(
        reasoning="list first", content="", tool_calls=[ToolCall(id="call_1", name="bash", arguments={"command": "ls"})]
    )
    assert decoded.finish_reason == FinishReason.stop and decoded.completion_tokens == 4


def test_an_anthropic_body_with_a_cut_off_turn_decodes():
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "stop_reason": "max_tokens",
        "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}, {"type": "text", "text": "Half"}],
        "usage": {"input_tokens": 7, "output_tokens": 3},
    }
    decoded = DIALECTS["anthropic"].decode_reply(body)
    assert decoded.output == ParsedOutput(reasoning="hmm", content="Half")
    assert decoded.finish_reason == FinishReason.length and decoded.prompt_tokens == 7


@pytest.mark.parametrize(
    ("dialect", "body", "field"),
    [
        ("chat_completions", {"choices": []}, "choices"),
        ("chat_completions", {"choices": [{"message": {"content": 3}}]}, "choices[0].message.content"),
        ("chat_completions", {"object": "error"}, "choices"),
        ("anthropic", {"type": "message"}, "content"),
        ("anthropic", {"content": [{"type": "tool_use", "name": "x", "input": {}}]}, "content[0].id"),
    ],
)
def test_malformed_replies_name_the_field(dialect, body, field):
    with pytest.raises(DialectError) as err:
        DIALECTS[dialect].decode_reply(body)
    assert err.value.param == field, err.value
