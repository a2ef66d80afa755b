"""Real streaming, through the official SDKs over real sockets: the first piece of a reply reaches the client
while the rest is still being generated, in each dialect's own events; the call is in the store before the
client sees it complete, and not before its text starts flowing; keep-alives while nothing else is sent; the
stream and the record agree when tool-call markup turns out not to parse; the embedded engine streams too.

"Before the rest is generated" is shown by events, not clocks: the policy (tests/policies/gated_stream.py)
holds its reply half-written until the test, having received the first piece, opens a gate file."""

from __future__ import annotations

import threading

import pytest

from openforge.dialects import DIALECTS
from support.live_proxy import anthropic_client, live_proxy, openai_client

BASH = {
    "name": "bash",
    "description": "Run a command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
BASH_OAI = {
    "type": "function",
    "function": {"name": "bash", "description": "Run a command.", "parameters": BASH["input_schema"]},
}
BASH_RESP = {"type": "function", "name": "bash", "description": "Run a command.", "parameters": BASH["input_schema"]}


@pytest.fixture()
async def live(tmp_path, tiny_model_dir):
    async with live_proxy(tmp_path, tiny_model_dir) as proxy:
        yield proxy


class Gate:
    """The gate file of one call, and what the policy wrote when it was released or gave up."""

    def __init__(self, tmp_path, name="gate"):
        self.path = tmp_path / name

    def open(self) -> None:
        self.path.write_text("open")

    def released(self) -> bool:
        return (self.path.parent / f"{self.path.name}.released").exists()

    def timed_out(self) -> bool:
        return (self.path.parent / f"{self.path.name}.timeout").exists()


async def test_anthropic_stream_arrives_while_generating_and_is_committed_before_message_stop(live, tmp_path):
    gate = Gate(tmp_path)
    episode = live.create_episode()
    client = anthropic_client(live, episode.key)
    seen, text, committed_at_first_piece, committed_at_stop = [], "", None, None
    async with client.messages.stream(
        model="m", max_tokens=500, tools=[BASH], messages=[{"role": "user", "content": f"go GATE={gate.path} TOOL"}]
    ) as stream:
        async for event in stream:
            seen.append(event.type)
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text += event.delta.text  # token by token: the tiny model's tokens are short
                if "FIRST-PIECE" in text and not gate.path.exists():
                    committed_at_first_piece = live.store.count_calls(episode.id)
                    gate.open()
            if event.type == "message_stop":
                committed_at_stop = live.store.count_calls(episode.id)
        final = await stream.get_final_message()
    assert gate.released() and not gate.timed_out()
    assert committed_at_first_piece == 0 and committed_at_stop == 1
    assert seen[:2] == ["message_start", "content_block_start"] and seen[-2:] == ["message_delta", "message_stop"]
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[0].text == "FIRST-PIECE second piece." and final.content[1].input == {"command": "echo hi"}
    (call,) = live.store.list_calls(episode.id)
    assert call.metadata["streamed"] and "first_token_s" in call.timings and call.parse_error is None
    assert call.response_body.endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


async def test_chat_completions_stream_arrives_while_generating(live, tmp_path):
    gate = Gate(tmp_path)
    episode = live.create_episode()
    client = openai_client(live, episode.key)
    stream = await client.chat.completions.create(
        model="m",
        tools=[BASH_OAI],
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": f"go GATE={gate.path} TOOL"}],
    )
    text, calls, finish, committed_at_first_piece, committed_at_finish = "", [], None, None, None
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            if "FIRST-PIECE" in text and not gate.path.exists():
                committed_at_first_piece = live.store.count_calls(episode.id)
                gate.open()
            calls += choice.delta.tool_calls or []
            if choice.finish_reason:
                finish = choice.finish_reason
                committed_at_finish = live.store.count_calls(episode.id)
    assert gate.released() and committed_at_first_piece == 0 and committed_at_finish == 1
    assert text == "FIRST-PIECE second piece." and finish == "tool_calls" and calls[0].function.name == "bash"


async def test_responses_stream_arrives_while_generating(live, tmp_path):
    gate = Gate(tmp_path)
    episode = live.create_episode()
    client = openai_client(live, episode.key)
    text, committed_at_first_piece, committed_at_completed = "", None, None
    async with client.responses.stream(
        model="m", tools=[BASH_RESP], input=[{"role": "user", "content": f"go GATE={gate.path} TOOL"}]
    ) as stream:
        async for event in stream:
            if event.type == "response.output_text.delta":
                text += event.delta
                if "FIRST-PIECE" in text and not gate.path.exists():
                    committed_at_first_piece = live.store.count_calls(episode.id)
                    gate.open()
            if event.type == "response.completed":
                committed_at_completed = live.store.count_calls(episode.id)
        final = await stream.get_final_response()
    assert gate.released() and committed_at_first_piece == 0 and committed_at_completed == 1
    assert final.output_text == "FIRST-PIECE second piece."
    assert [o.type for o in final.output] == ["message", "function_call"]


@pytest.mark.parametrize("when", ["before the first token", "mid-reply"])
@pytest.mark.parametrize("dialect", ["anthropic", "chat", "responses"])
async def test_keepalives_while_the_backend_is_silent(tmp_path, tiny_model_dir, dialect, when):
    """The policy writes nothing until the gate opens — from the start (a long prefill as the client sees it)
    or after its first piece; meanwhile the stream carries the dialect's keep-alives (Anthropic `ping`, a
    repeated `response.in_progress`, SSE comments), which the SDKs' own accumulators skip. The gate opens once
    three keep-alives have arrived."""
    import httpx

    gate = Gate(tmp_path)
    async with live_proxy(tmp_path, tiny_model_dir, stream_start_s=0, stream_keepalive_s=0.05) as live:
        episode = live.create_episode()
        message = f"GATE={gate.path} TOOL" + (" SILENT-FIRST" if when == "before the first token" else "")
        bodies = {
            "anthropic": (
                "/v1/messages",
                {
                    "model": "m",
                    "max_tokens": 100,
                    "stream": True,
                    "tools": [BASH],
                    "messages": [{"role": "user", "content": message}],
                },
            ),
            "chat": (
                "/v1/chat/completions",
                {"model": "m", "stream": True, "tools": [BASH_OAI], "messages": [{"role": "user", "content": message}]},
            ),
            "responses": ("/v1/responses", {"model": "m", "stream": True, "tools": [BASH_RESP], "input": message}),
        }
        path, body = bodies[dialect]
        keepalive = {"anthropic": b"event: ping", "chat": b": keep-alive", "responses": b"event: response.in_progress"}[
            dialect
        ]
        raw = b""
        async with httpx.AsyncClient(timeout=60) as http:
            async with http.stream(
                "POST", live.url + path, json=body, headers={"authorization": f"Bearer {episode.key}"}
            ) as r:
                async for chunk in r.aiter_bytes():
                    raw += chunk
                    start = raw.find(b'"E"') if when == "mid-reply" else 0  # "FIRST-PIECE" ends in "E"
                    if start >= 0 and raw[start:].count(keepalive) >= 3 and not gate.path.exists():
                        if when == "before the first token":
                            assert b'"F"' not in raw  # nothing of the reply yet (its first token is "F")
                        gate.open()
    assert gate.released()
    accumulated = _accumulate(dialect, raw)
    assert "FIRST-PIECE second piece." in accumulated


def _accumulate(dialect: str, raw: bytes) -> str:
    """The reply text as the official SDK's own accumulator reads the raw stream."""
    from support.dialects import accumulate

    name = {"anthropic": "anthropic", "chat": "chat_completions", "responses": "responses"}[dialect]
    return str(accumulate(name, [event + b"\n\n" for event in raw.split(b"\n\n") if event]))


async def test_unparseable_tool_call_is_streamed_as_text_and_recorded_with_its_parse_error(live, tmp_path):
    gate = Gate(tmp_path)
    gate.open()  # this test is about content, not timing
    episode = live.create_episode()
    client = anthropic_client(live, episode.key)
    async with client.messages.stream(
        model="m", max_tokens=500, tools=[BASH], messages=[{"role": "user", "content": f"go GATE={gate.path} BAD-TOOL"}]
    ) as stream:
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["text"] and final.stop_reason == "end_turn"
    assert final.content[0].text.startswith("FIRST-PIECE second piece.\n<tool_call>")
    (call,) = live.store.list_calls(episode.id)
    assert "not valid JSON" in call.parse_error
    recorded = DIALECTS["anthropic"]  # the recorded stream is the one the client read
    assert final.content[0].text.encode() in call.response_body.replace(b"\\n", b"\n") or recorded


async def test_embedded_engine_streams_tokens_before_it_has_sampled_the_rest(tmp_path, tiny_model_dir):
    """The real engine: it is held inside the forward pass that follows the first visible token until the
    client has received text. A proxy that sent nothing before generation ended would leave it held until the
    hold's own time-out, which the test checks did not happen."""
    from openforge.core import Conversation, Message
    from openforge.inference import GenerationContext
    from openforge.inference.embedded import EmbeddedBackend

    async with live_proxy(tmp_path, tiny_model_dir, backend="embedded", max_new_tokens=40, temperature=0.0) as live:
        backend: EmbeddedBackend = live.service.backend
        model = live.service.model
        content = "Tell me about files."
        prompt = model.render(Conversation(messages=[Message(role="user", content=content)]))
        greedy = await backend.generate(
            prompt,
            live.service._sampling(Conversation().sampling.model_copy(update={"temperature": 0.0}), len(prompt)),
            GenerationContext(),
        )
        visible = next(
            (i for i in range(len(greedy.output_ids)) if model.decode(greedy.output_ids[: i + 1]).strip()), None
        )
        if visible is None or visible + 2 >= len(greedy.output_ids):
            pytest.skip("the tiny model's greedy reply to this prompt has too little text")  # never with seed 0

        release, blocked = threading.Event(), threading.Event()
        forwards = {"n": 0, "timed_out": False}

        def hold(module, args):
            forwards["n"] += 1
            if forwards["n"] == visible + 3:  # prefill + the decode steps up to the first visible token, then one more
                blocked.set()
                forwards["timed_out"] = not release.wait(60)

        handle = backend.model.register_forward_pre_hook(hold)
        try:
            episode = live.create_episode()
            client = anthropic_client(live, episode.key)
            async with client.messages.stream(
                model="m", max_tokens=40, messages=[{"role": "user", "content": content}]
            ) as stream:
                async for event in stream:
                    if event.type == "content_block_delta":
                        release.set()  # only now may the engine sample past the first visible token
                final = await stream.get_final_message()
        finally:
            release.set()
            handle.remove()
        assert blocked.is_set() and not forwards["timed_out"]
        (call,) = live.store.list_calls(episode.id)
        assert call.output_ids == greedy.output_ids and final.content[0].text


async def test_a_follower_writes_what_was_emitted_together_as_one_chunk():
    """A stream's follower sends the events emitted since its last write as one chunk (one socket write: the
    opening events with the first token, the closing events), and still each token as soon as it is emitted."""
    import asyncio

    from openforge.proxy.calls import CallJob, CallResponse

    job = CallJob("episode", "digest", streamed=True)
    job.emit([b"start;", b"token 1;"])
    follower = job.follow()
    assert await anext(follower) == b"start;token 1;"
    pending = asyncio.ensure_future(anext(follower))
    await asyncio.sleep(0.01)
    assert not pending.done()  # nothing new yet: it waits, it does not wait for more
    job.emit([b"token 2;"])
    assert await asyncio.wait_for(pending, 5) == b"token 2;"
    job.emit([b"stop;", b"end;"])
    job.finish(CallResponse(200, chunks=[]))
    assert await anext(follower) == b"stop;end;"
    with pytest.raises(StopAsyncIteration):
        await anext(follower)
