"""Dialects against the official SDKs: every reply (streamed or not) in all three dialects parses with the
`anthropic` and `openai` SDK types and their stream accumulators; every error is raised as the right typed
exception; real harness request shapes decode as expected."""

from __future__ import annotations

import json

import anthropic
import httpx2
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from openforge.core import FinishReason, Message, ParsedOutput, ToolCall
from openforge.dialects import (
    COUNT_ROUTES,
    DIALECTS,
    ERROR_STATUS,
    ROUTES,
    DialectError,
    Reply,
    ToolRoute,
    dialect_for_path,
)
from openforge.dialects.base import BLOCK_SEPARATOR, IMAGE_PLACEHOLDER
from support.dialects import (
    EXEC_TOOL,
    FIXTURES,
    SCENARIOS,
    WEATHER_TOOL,
    accumulate,
    canned_reply,
    json_events,
    parse_sse,
    project,
    request_for,
    validate_body,
    validate_events,
)
from support.images import b64, png

# ---- a tiny server: decode with the dialect, answer a canned reply ------------------------------------


def make_app() -> Starlette:
    def endpoint(name: str):
        dialect = DIALECTS[name]

        async def handle(request: Request) -> Response:
            body = await request.body()
            try:
                decoded = dialect.decode(body)
            except DialectError as err:
                status, payload = dialect.error(err)
                return JSONResponse(payload, status_code=status)
            scenario = request.headers.get("x-scenario", "text")
            if scenario.startswith("error:"):
                kind = scenario.split(":", 1)[1]
                err = (
                    DialectError.prompt_too_long(200_000, 32_768)
                    if kind == "prompt_too_long"
                    else DialectError(ERROR_STATUS[kind], kind, f"test {kind} error")
                )
                if request.headers.get("x-in-stream"):
                    return Response(dialect.error_stream(err, response_id="resp_err"), media_type="text/event-stream")
                status, payload = dialect.error(err)
                return JSONResponse(payload, status_code=status)
            reply = canned_reply(name, scenario, model=decoded.model)
            if decoded.stream:
                chunks = dialect.stream(reply, decoded, chunk_chars=int(request.headers.get("x-chunk", "7")))

                async def events():
                    for chunk in chunks:
                        yield chunk

                return StreamingResponse(events(), media_type="text/event-stream")
            return JSONResponse(dialect.encode(reply, decoded))

        return handle

    return Starlette(
        routes=[
            Route("/v1/messages", endpoint("anthropic"), methods=["POST"]),
            Route("/v1/responses", endpoint("responses"), methods=["POST"]),
            Route("/v1/chat/completions", endpoint("chat_completions"), methods=["POST"]),
        ]
    )


APP = make_app()


def http_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=APP), base_url="http://proxy.test")


def anthropic_client() -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="k", base_url="http://proxy.test", http_client=http_client(), max_retries=0)


def openai_client() -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="k", base_url="http://proxy.test/v1", http_client=http_client(), max_retries=0)


ANTHROPIC_TOOLS = [
    {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
    for t in (WEATHER_TOOL, EXEC_TOOL)
]
RESPONSES_TOOLS = [{"type": "function", "strict": False, **t} for t in (WEATHER_TOOL, EXEC_TOOL)]
CHAT_TOOLS = [{"type": "function", "function": t} for t in (WEATHER_TOOL, EXEC_TOOL)]


def expected_output(dialect: str, scenario: str) -> ParsedOutput:
    return canned_reply(dialect, scenario).output


# ---- Anthropic Messages ------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_anthropic_sdk_create_and_stream_agree(scenario):
    client = anthropic_client()
    kwargs = dict(
        model="claude-test",
        max_tokens=1000,
        messages=[{"role": "user", "content": "hi"}],
        tools=ANTHROPIC_TOOLS,
        extra_headers={"x-scenario": scenario},
    )
    message = await client.messages.create(**kwargs)
    assert isinstance(message, anthropic.types.Message)
    async with client.messages.stream(**kwargs) as stream:
        final = await stream.get_final_message()
    assert project("anthropic", final.to_dict()) == project("anthropic", message.to_dict())

    expected = expected_output("anthropic", scenario)
    thinking = [b for b in message.content if b.type == "thinking"]
    assert [b.thinking for b in thinking] == ([expected.reasoning] if expected.reasoning is not None else [])
    assert all(b.signature for b in thinking)  # Claude Code drops a thinking turn without one
    assert "".join(b.text for b in message.content if b.type == "text") == expected.content
    calls = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
    assert calls == [(c.id, c.name, c.arguments) for c in expected.tool_calls]
    want_stop = {"length": "max_tokens"}.get(scenario, "tool_use" if expected.tool_calls else "end_turn")
    assert message.stop_reason == want_stop
    assert message.usage.input_tokens == 123 and message.usage.output_tokens == 45
    assert message.model == "claude-test"


async def test_anthropic_thinking_block_ends_with_signature_delta():
    decoded = request_for("anthropic", stream=True)
    chunks = DIALECTS["anthropic"].stream(canned_reply("anthropic", "reasoning"), decoded, chunk_chars=4)
    events = json_events(chunks)
    start = next(
        i
        for i, e in enumerate(events)
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "thinking"
    )
    stop = next(
        i for i, e in enumerate(events) if e["type"] == "content_block_stop" and e["index"] == events[start]["index"]
    )
    assert events[stop - 1]["delta"]["type"] == "signature_delta" and events[stop - 1]["delta"]["signature"]
    assert [e["type"] for e in events[:2]] == ["message_start", "ping"]
    assert [e["type"] for e in events[-2:]] == ["message_delta", "message_stop"]


async def test_anthropic_tool_input_streams_in_several_chunks():
    decoded = request_for("anthropic", stream=True)
    chunks = DIALECTS["anthropic"].stream(canned_reply("anthropic", "tools"), decoded, chunk_chars=5)
    deltas = [
        e
        for e in json_events(chunks)
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
    ]
    assert len(deltas) > 4
    assert accumulate("anthropic", chunks)["content"][2]["input"] == SCENARIOS["tools"][0].tool_calls[0].arguments


ANTHROPIC_ERRORS = {
    "invalid_request": anthropic.BadRequestError,
    "prompt_too_long": anthropic.BadRequestError,
    "authentication": anthropic.AuthenticationError,
    "not_found": anthropic.NotFoundError,
    "request_too_large": anthropic.ContentTooLargeError,
    "rate_limit": anthropic.RateLimitError,
    "overloaded": anthropic.OverloadedError,
    "api_error": anthropic.InternalServerError,
}


@pytest.mark.parametrize("kind", list(ANTHROPIC_ERRORS))
async def test_anthropic_errors_are_typed_sdk_exceptions(kind):
    client = anthropic_client()
    with pytest.raises(ANTHROPIC_ERRORS[kind]) as info:
        await client.messages.create(
            model="m",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-scenario": f"error:{kind}"},
        )
    body = info.value.body
    assert body["type"] == "error" and body["error"]["message"]
    if kind == "prompt_too_long":
        assert body["error"]["type"] == "invalid_request_error"
        assert "prompt is too long: 200000 tokens > 32768 maximum" in body["error"]["message"]


async def test_anthropic_in_stream_error_is_raised():
    client = anthropic_client()
    with pytest.raises(anthropic.APIStatusError) as info:
        async with client.messages.stream(
            model="m",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-scenario": "error:overloaded", "x-in-stream": "1"},
        ) as stream:
            await stream.get_final_message()
    assert info.value.body["error"]["type"] == "overloaded_error"


async def test_anthropic_bad_request_reaches_sdk_as_bad_request():
    client = anthropic_client()
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(
            model="m",
            max_tokens=10,
            messages=[
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}]}
            ],
        )
    assert "toolu_nope" in info.value.body["error"]["message"]
    assert info.value.body["error"]["type"] == "invalid_request_error"


# ---- OpenAI Responses ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_responses_sdk_create_and_stream_agree(scenario):
    client = openai_client()
    kwargs = dict(model="gpt-test", input="hi", tools=RESPONSES_TOOLS, extra_headers={"x-scenario": scenario})
    response = await client.responses.create(**kwargs)
    assert isinstance(response, openai.types.responses.Response)
    async with client.responses.stream(**kwargs) as stream:
        async for _ in stream:
            pass
        final = await stream.get_final_response()
    assert project("responses", final.to_dict()) == project("responses", response.to_dict())

    raw_events = [e async for e in await client.responses.create(stream=True, **kwargs)]
    assert raw_events[-1].type == "response.completed" and raw_events[-1].response.usage.total_tokens == 168
    assert [e.sequence_number for e in raw_events] == list(range(len(raw_events)))

    expected = expected_output("responses", scenario)
    assert response.output_text == expected.content
    calls = [(i.call_id, i.name, json.loads(i.arguments)) for i in response.output if i.type == "function_call"]
    assert calls == [(c.id, c.name, c.arguments) for c in expected.tool_calls]
    reasoning = [i for i in response.output if i.type == "reasoning"]
    assert [r.content[0].text for r in reasoning] == ([expected.reasoning] if expected.reasoning is not None else [])
    assert response.status == ("incomplete" if scenario == "length" else "completed")
    if scenario == "length":
        assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.input_tokens == 123 and response.usage.output_tokens == 45


OPENAI_ERRORS = {
    "invalid_request": openai.BadRequestError,
    "prompt_too_long": openai.BadRequestError,
    "authentication": openai.AuthenticationError,
    "not_found": openai.NotFoundError,
    "request_too_large": openai.APIStatusError,
    "rate_limit": openai.RateLimitError,
    "overloaded": openai.InternalServerError,
    "api_error": openai.InternalServerError,
}


@pytest.mark.parametrize("kind", list(OPENAI_ERRORS))
@pytest.mark.parametrize("api", ["responses", "chat_completions"])
async def test_openai_errors_are_typed_sdk_exceptions(api, kind):
    client = openai_client()
    with pytest.raises(OPENAI_ERRORS[kind]) as info:
        if api == "responses":
            await client.responses.create(model="m", input="hi", extra_headers={"x-scenario": f"error:{kind}"})
        else:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-scenario": f"error:{kind}"}
            )
    assert info.value.status_code == {"overloaded": 503}.get(kind, ERROR_STATUS[kind])
    assert set(info.value.body) == {"message", "type", "param", "code"}  # the SDK hands over body["error"]
    if kind == "prompt_too_long":
        assert info.value.code == "context_length_exceeded"


async def test_responses_in_stream_error_is_response_failed():
    client = openai_client()
    events = [
        e
        async for e in await client.responses.create(
            model="m",
            input="hi",
            stream=True,
            extra_headers={"x-scenario": "error:prompt_too_long", "x-in-stream": "1"},
        )
    ]
    assert [e.type for e in events] == ["response.created", "response.failed"]
    assert events[1].response.error.code == "context_length_exceeded"
    assert events[1].response.status == "failed"


async def test_responses_bad_request_reaches_sdk_as_bad_request():
    client = openai_client()
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.create(model="m", input="hi", previous_response_id="resp_123")
    assert info.value.param == "previous_response_id"
    assert "previous_response_id" in info.value.message


# ---- OpenAI Chat Completions --------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_chat_sdk_create_and_stream_agree(scenario):
    client = openai_client()
    kwargs = dict(
        model="gpt-test",
        messages=[{"role": "user", "content": "hi"}],
        tools=CHAT_TOOLS,
        extra_headers={"x-scenario": scenario},
    )
    completion = await client.chat.completions.create(**kwargs)
    assert isinstance(completion, openai.types.chat.ChatCompletion)

    from openai.lib.streaming.chat import ChatCompletionStreamState

    state = ChatCompletionStreamState()
    chunks = []
    async for chunk in await client.chat.completions.create(
        stream=True, stream_options={"include_usage": True}, **kwargs
    ):
        chunks.append(chunk)
        state.handle_chunk(chunk)
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 168
    assert project("chat_completions", state.current_completion_snapshot.to_dict()) == project(
        "chat_completions", completion.to_dict()
    )

    strict_tools = [{"type": "function", "function": {**t, "strict": True}} for t in (WEATHER_TOOL, EXEC_TOOL)]
    helper_kwargs = {**kwargs, "tools": strict_tools}
    if scenario == "length":  # the helper refuses a truncated completion, by design
        with pytest.raises(openai.LengthFinishReasonError):
            async with client.chat.completions.stream(**helper_kwargs) as stream:
                await stream.get_final_completion()
    else:
        async with client.chat.completions.stream(**helper_kwargs) as stream:
            final = await stream.get_final_completion()
        assert project("chat_completions", final.to_dict()) == project("chat_completions", completion.to_dict())

    expected = expected_output("chat_completions", scenario)
    message = completion.choices[0].message
    assert (message.content or "") == expected.content
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []] == [
        (c.id, c.name, c.arguments) for c in expected.tool_calls
    ]
    assert getattr(message, "reasoning_content", None) == expected.reasoning
    want = "length" if scenario == "length" else ("tool_calls" if expected.tool_calls else "stop")
    assert completion.choices[0].finish_reason == want
    assert completion.usage.prompt_tokens == 123 and completion.usage.completion_tokens == 45


async def test_chat_stream_without_include_usage_has_no_usage_chunk():
    client = openai_client()
    chunks = [
        c
        async for c in await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True, extra_headers={"x-scenario": "text"}
        )
    ]
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_chat_in_stream_error_is_raised():
    client = openai_client()
    with pytest.raises(openai.APIError) as info:
        async for _ in await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            extra_headers={"x-scenario": "error:overloaded", "x-in-stream": "1"},
        ):
            pass
    assert "test overloaded error" in info.value.message


async def test_chat_bad_request_reaches_sdk_as_bad_request():
    client = openai_client()
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_x", "content": "r"}],
        )
    assert info.value.param == "messages[1].tool_call_id"


# ---- strict SDK types, every scenario, with and without chunking --------------------------------------


@pytest.mark.parametrize("chunk_chars", [None, 1, 6])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_bodies_and_events_validate_strictly_and_streams_match_bodies(dialect, scenario, chunk_chars):
    d = DIALECTS[dialect]
    request = request_for(dialect, stream=True)
    reply = canned_reply(dialect, scenario)
    body = d.encode(reply, request)
    validate_body(dialect, body)  # full pydantic validation of every field, not the SDKs' lenient parse
    chunks = d.stream(reply, request, chunk_chars=chunk_chars)
    validate_events(dialect, chunks)
    assert project(dialect, accumulate(dialect, chunks)) == project(dialect, body)
    if dialect == "chat_completions":
        assert parse_sse(chunks)[-1] == (None, "[DONE]")
    if dialect == "responses":
        assert json.loads(parse_sse(chunks)[-1][1])["response"] == body


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_error_bodies_validate_as_sdk_error_types(dialect):
    d = DIALECTS[dialect]
    for kind, status in ERROR_STATUS.items():
        code, body = d.error(DialectError(status, kind, "m", param="messages[0]"))
        assert 400 <= code < 600
        if dialect == "anthropic" and kind == "request_too_large":
            # The API's documented 413 type; this SDK's ErrorResponse union does not list it (it raises
            # ContentTooLargeError by status, tested above).
            assert body == {"type": "error", "error": {"type": "request_too_large", "message": "m"}}
        elif dialect == "anthropic":
            anthropic.types.ErrorResponse.model_validate(body)
        else:
            openai.types.ErrorObject.model_validate(body["error"])
        stream = d.error_stream(DialectError(status, kind, "m"))
        assert stream.endswith(b"\n\n") and parse_sse(stream)


# ---- namespace and custom tools (Codex) ---------------------------------------------------------------


def test_responses_namespace_and_custom_tool_calls_go_back_in_their_own_shape():
    d = DIALECTS["responses"]
    body = {
        "model": "m",
        "input": "hi",
        "tools": [
            {
                "type": "namespace",
                "name": "clock",
                "description": "d",
                "tools": [
                    {
                        "type": "function",
                        "name": "sleep",
                        "parameters": {"type": "object", "properties": {"ms": {"type": "number"}}},
                    },
                ],
            },
            {
                "type": "custom",
                "name": "apply_patch",
                "description": "Apply a patch.",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"},
            },
            {"type": "web_search"},
            {"type": "local_shell"},
        ],
    }
    decoded = d.decode(json.dumps(body).encode())
    assert [t.name for t in decoded.conversation.tools] == ["clock.sleep", "apply_patch"]
    assert decoded.dropped_tools == ["web_search", "local_shell"]
    assert decoded.tool_routes["clock.sleep"] == ToolRoute(name="sleep", namespace="clock")
    assert "start: begin_patch" in decoded.conversation.tools[1].parameters["properties"]["input"]["description"]

    reply = Reply(
        id="resp_ns",
        model="m",
        finish_reason=FinishReason.stop,
        prompt_tokens=1,
        completion_tokens=1,
        created=0,
        output=ParsedOutput(
            tool_calls=[
                ToolCall(id="call_1", name="clock.sleep", arguments={"ms": 5}),
                ToolCall(id="call_2", name="apply_patch", arguments={"input": "*** Begin Patch\n*** End Patch"}),
            ]
        ),
    )
    out = d.encode(reply, decoded)
    validate_body("responses", out)
    sleep, patch = out["output"]
    assert (sleep["type"], sleep["name"], sleep["namespace"], json.loads(sleep["arguments"])) == (
        "function_call",
        "sleep",
        "clock",
        {"ms": 5},
    )
    assert (patch["type"], patch["name"], patch["input"]) == (
        "custom_tool_call",
        "apply_patch",
        "*** Begin Patch\n*** End Patch",
    )
    chunks = d.stream(reply, decoded, chunk_chars=4)
    validate_events("responses", chunks)
    assert project("responses", accumulate("responses", chunks)) == project("responses", out)

    # Codex sends the items back: they decode to the same canonical calls.
    again = {
        **body,
        "input": [
            "hi",
            *out["output"],
            {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
            {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
        ],
    }
    again["input"][0] = {"role": "user", "content": "hi"}
    messages = d.decode(json.dumps(again).encode()).conversation.messages
    assert messages[1].tool_calls == reply.output.tool_calls
    assert [(m.role, m.name, m.content) for m in messages[2:]] == [
        ("tool", "clock.sleep", "ok"),
        ("tool", "apply_patch", "Done!"),
    ]


# ---- real harness request shapes ----------------------------------------------------------------------


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_claude_code_request_decodes():
    decoded = DIALECTS["anthropic"].decode(fixture("claude_code_messages.json"))
    c = decoded.conversation
    assert decoded.stream and not decoded.side_call
    assert decoded.max_tokens_requested == 32000 and c.sampling.max_tokens == 32000
    assert decoded.reasoning_requested is True
    assert (
        c.system.startswith("You are Claude Code") and BLOCK_SEPARATOR + "\nYou are an interactive CLI tool" in c.system
    )
    assert [t.name for t in c.tools] == ["Bash", "Read", "Write"] and decoded.dropped_tools == ["web_search"]
    assert c.tools[0].parameters["required"] == ["command"]
    assert [m.role for m in c.messages] == ["user", "assistant", "tool", "system", "assistant", "tool", "user"]
    first, reply = c.messages[0], c.messages[1]
    assert (
        first.content.endswith("Read nonce.txt and write its contents to out.txt.")
        and "<system-reminder>" in first.content
    )
    assert reply.reasoning == "I need the nonce first, so I read nonce.txt."
    assert reply.content == "I'll read the nonce first."
    assert reply.tool_calls == [ToolCall(id="toolu_01Nonce", name="Read", arguments={"file_path": "/work/nonce.txt"})]
    assert c.messages[2] == Message(
        role="tool", tool_call_id="toolu_01Nonce", name="Read", content="     1\tnonce-7f3a9c\n"
    )
    assert c.messages[3].content.startswith("<system-reminder>")
    assert c.messages[5].is_error and c.messages[5].name == "Write"
    assert c.messages[6].content == "Try again with Bash."
    assert c.response_format is None


def test_claude_code_request_with_moving_cache_control_decodes_the_same():
    data = json.loads(fixture("claude_code_messages.json"))
    for message in data["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                block.pop("cache_control", None)
    data["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    d = DIALECTS["anthropic"]
    assert (
        d.decode(json.dumps(data).encode()).conversation == d.decode(fixture("claude_code_messages.json")).conversation
    )


def test_codex_request_decodes():
    decoded = DIALECTS["responses"].decode(fixture("codex_responses.json"))
    c = decoded.conversation
    assert decoded.stream and decoded.reasoning_requested and not decoded.parallel_tool_calls
    assert c.system.startswith("You are Codex")
    assert [t.name for t in c.tools] == ["exec_command", "write_stdin", "clock.sleep", "clock.curr_time"]
    assert decoded.dropped_tools == ["web_search"]
    assert [m.role for m in c.messages] == ["system", "user", "user", "assistant", "tool", "assistant", "tool", "tool"]
    assert c.messages[0].content.startswith("<permissions instructions>")
    first = c.messages[3]
    assert first.reasoning == "Read the nonce first." and first.content == ""
    assert first.tool_calls == [
        ToolCall(id="call_a1", name="exec_command", arguments={"cmd": "cat nonce.txt", "yield_time_ms": 1000})
    ]
    second = c.messages[5]
    assert second.content == "Got it; writing out.txt." and second.reasoning is None
    assert [(t.id, t.name) for t in second.tool_calls] == [("call_a2", "exec_command"), ("call_a3", "clock.sleep")]
    assert "nonce-7f3a9c" in c.messages[4].content
    assert [(m.tool_call_id, m.name, m.content) for m in c.messages[6:]] == [
        ("call_a2", "exec_command", "Process exited with code 0"),
        ("call_a3", "clock.sleep", "slept 10 ms"),
    ]


def test_openclaw_request_decodes():
    decoded = DIALECTS["chat_completions"].decode(fixture("openclaw_chat.json"))
    c = decoded.conversation
    assert decoded.stream and decoded.include_usage and decoded.max_tokens_requested == 8192
    assert c.system.startswith("You are a personal assistant running inside OpenClaw")
    assert [m.role for m in c.messages] == ["user", "assistant", "tool", "assistant", "tool", "user"]
    assert c.messages[1].tool_calls == [ToolCall(id="callab", name="read", arguments={"path": "nonce.txt"})]
    assert c.messages[1].content == ""
    assert c.messages[3].reasoning == "The nonce is nonce-7f3a9c." and c.messages[3].content == "Writing it now."
    assert c.messages[4].content == "Successfully wrote 12 bytes to out.txt" and c.messages[4].name == "write"
    assert c.sampling.temperature == 0.7


def test_side_calls_are_requests_without_tools():
    for dialect in DIALECTS:
        assert request_for(dialect, tools=False).side_call
        assert not request_for(dialect).side_call
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "t"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}],
    }
    assert DIALECTS["anthropic"].decode(json.dumps(body).encode()).side_call  # only server tools: nothing to call


def test_images_become_placeholders_kept_by_reference():
    shot = png(4, 4)
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(shot)}},
                ],
            },
        ],
    }
    decoded = DIALECTS["anthropic"].decode(json.dumps(body).encode())
    (message,) = decoded.conversation.messages
    assert message.content == "look" + BLOCK_SEPARATOR + IMAGE_PLACEHOLDER
    assert [(i.offset, i.length, i.media_type, i.size) for i in message.images] == [
        (len("look" + BLOCK_SEPARATOR), len(IMAGE_PLACEHOLDER), "image/png", len(shot))
    ]
    assert [i.data for i in decoded.images] == [shot]


def test_count_tokens_requests_need_no_max_tokens():
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    with pytest.raises(DialectError):
        DIALECTS["anthropic"].decode(body)
    assert DIALECTS["anthropic"].decode(body, for_count=True).max_tokens_requested is None


def test_response_formats_decode_to_json_schemas():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    a = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
        "output_config": {"effort": "low", "format": {"type": "json_schema", "schema": schema}},
    }
    r = {
        "model": "m",
        "input": "x",
        "text": {"format": {"type": "json_schema", "name": "out", "schema": schema, "strict": True}},
    }
    c = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}},
    }
    for dialect, body in (("anthropic", a), ("responses", r), ("chat_completions", c)):
        assert DIALECTS[dialect].decode(json.dumps(body).encode()).conversation.response_format == schema
    c["response_format"] = {"type": "json_object"}
    assert DIALECTS["chat_completions"].decode(json.dumps(c).encode()).conversation.response_format == {
        "type": "object"
    }


def test_registry_routes():
    assert set(DIALECTS) == {"anthropic", "responses", "chat_completions"}
    assert ROUTES["/v1/messages"] is DIALECTS["anthropic"]
    assert dialect_for_path("/v1/messages?beta=true") is DIALECTS["anthropic"]
    assert dialect_for_path("/e/KEY123/v1/responses") is DIALECTS["responses"]
    assert dialect_for_path("/responses") is DIALECTS["responses"]
    assert dialect_for_path("/chat/completions/") is DIALECTS["chat_completions"]
    assert dialect_for_path("/v1/models") is None
    assert dialect_for_path("/v1/messages/count_tokens") is None
    assert dialect_for_path("/v1/messages/count_tokens", COUNT_ROUTES) is DIALECTS["anthropic"]
    assert dialect_for_path("/xv1/messages") is None  # a route matches whole path segments only
    assert [d.count_routes for d in DIALECTS.values()] == [("/v1/messages/count_tokens",), (), ()]


def test_ids_carry_the_dialects_prefixes():
    for name, reply_prefix, call_prefix in [
        ("anthropic", "msg_", "toolu_"),
        ("responses", "resp_", "call_"),
        ("chat_completions", "chatcmpl-", "call_"),
    ]:
        d = DIALECTS[name]
        reply_id, call_id = d.new_reply_id(), d.new_call_id()
        assert reply_id.startswith(reply_prefix) and len(reply_id) == len(reply_prefix) + 24
        assert call_id.startswith(call_prefix) and d.new_reply_id() != reply_id


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("scenario", ["text", "reasoning", "tools", "empty"])
def test_a_stream_written_while_the_reply_is_produced_is_the_finished_replys_stream(dialect, scenario):
    """serve-model streams text as it is sampled: deltas of any size, then `finish`, say what `stream` says
    for the finished reply (same events, content split differently)."""
    d = DIALECTS[dialect]
    reply = canned_reply(dialect, scenario)
    request = request_for(dialect, stream=True)
    encoder = d.stream_encoder(reply.start, request)
    events = encoder.start()
    out = reply.output
    if out.reasoning is not None:
        events += encoder.reasoning("") + encoder.reasoning(out.reasoning[:3]) + encoder.reasoning(out.reasoning[3:])
    for i in range(0, len(out.content), 5):
        events += encoder.text(out.content[i : i + 5])
    events += encoder.finish(reply)
    whole = d.stream(reply, request)
    assert project(dialect, accumulate(dialect, events)) == project(dialect, accumulate(dialect, whole))
    assert [e for e, _ in parse_sse(events) if e and "delta" not in e] == [
        e for e, _ in parse_sse(whole) if e and "delta" not in e
    ]


def test_dialect_error_contract():
    err = DialectError(400, "invalid_request", "bad thing", "messages[0]")
    assert (err.status, err.kind, err.message, err.param) == (400, "invalid_request", "bad thing", "messages[0]")
    with pytest.raises(ValueError):
        DialectError(400, "no_such_kind", "x")
    assert DialectError.prompt_too_long(10, 5).message == "prompt is too long: 10 tokens > 5 maximum"


def test_responses_items_group_into_assistant_turns():
    """Reasoning → message → calls is one turn; reasoning or text after text/calls starts the next."""
    items = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "more"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "b"}]},
        {"type": "message", "role": "assistant", "content": "c"},
        fc_item := {"type": "function_call", "call_id": "c1", "name": "exec", "arguments": ""},
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA-someone-elses-blob"},  # unreadable: skipped
        {"type": "function_call", "call_id": "c2", "name": "exec", "arguments": "{}"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "function_call", "call_id": "c3", "name": "exec", "arguments": "{}"},
    ]
    assert fc_item["arguments"] == ""
    body = {"model": "m", "input": items}
    messages = DIALECTS["responses"].decode(json.dumps(body).encode()).conversation.messages
    turns = [(m.reasoning, m.content, [c.id for c in m.tool_calls]) for m in messages[1:]]
    assert turns == [("plan", "a", []), ("more", "b", []), (None, "c", ["c1", "c2"]), (None, "", ["c3"])]
    assert messages[3].tool_calls[0].arguments == {}  # "" arguments: a call without arguments


def test_unknown_blocks_inside_tool_results_are_noted_not_fatal():
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_s", "name": "ToolSearch", "input": {"query": "git"}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_s",
                        "content": [
                            {"type": "text", "text": "found"},
                            {"type": "tool_reference", "tool_name": "mcp__git__log"},
                        ],
                    }
                ],
            },
        ],
    }
    tool = DIALECTS["anthropic"].decode(json.dumps(body).encode()).conversation.messages[1]
    assert tool.content == "found" + BLOCK_SEPARATOR + "[tool_reference block omitted]"
