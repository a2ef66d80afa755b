"""What one client may take from the proxy: headers and bodies within their time limits, connections within
the listener's cap and the forwarder's, calls in flight within the episode's cap; a retry of a call still
generating shares it instead of sampling again; a body that cannot fit the context is refused from its size
before anything is tokenized; a slow render does not hold up other episodes; any header value gets a
well-formed answer. All over real sockets (uvicorn on loopback), all decided by events, not clocks."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import anthropic
import httpx
import openai
import pytest

from openforge.sandbox.forwarder import serve as forwarder_serve
from support.live_proxy import anthropic_client, live_proxy, openai_client

OK_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def host_port(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("http://").rpartition(":")
    return host, int(port)


async def read_all(reader: asyncio.StreamReader) -> bytes:
    """Everything until the other side closes the connection (a reset counts as closed)."""
    try:
        return await asyncio.wait_for(reader.read(), 30)
    except ConnectionResetError:
        return b""


async def test_headers_must_arrive_in_time(tmp_path, tiny_model_dir):
    async with live_proxy(tmp_path, tiny_model_dir, header_timeout_s=0.3) as live:
        host, port = host_port(live.url)
        # a connection that sends nothing
        reader, writer = await asyncio.open_connection(host, port)
        idle = await read_all(reader)
        writer.close()
        # slowloris: a request line, then a header byte now and then, never the end of the headers
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        slow = b""
        for _ in range(1000):  # a byte every 20 ms, reading between the bytes; stops once answered
            try:
                writer.write(b"x")
                await writer.drain()
                slow = await asyncio.wait_for(reader.read(4096), 0.02)
            except TimeoutError:
                continue
            except ConnectionError:
                pass
            break
        slow += await read_all(reader)
        writer.close()
        # still serving
        async with httpx.AsyncClient() as http:
            assert (await http.get(live.url + "/")).status_code == 200
    for answer in (idle, slow):
        assert answer.startswith(b"HTTP/1.1 408 ") and b"did not arrive" in answer


async def test_a_body_must_arrive_in_time(tmp_path, tiny_model_dir):
    async with live_proxy(tmp_path, tiny_model_dir, body_timeout_s=0.3) as live:
        episode = live.create_episode()
        host, port = host_port(live.url)
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {episode.key}\r\n"
            'content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"model"'.encode()
        )
        answer = await read_all(reader)
        writer.close()
        assert live.store.count_calls(episode.id) == 0
    assert answer.startswith(b"HTTP/1.1 408 ")
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "request_timeout" and "did not arrive within" in body["error"]["message"]


async def test_listener_connection_cap(tmp_path, tiny_model_dir):
    async with live_proxy(tmp_path, tiny_model_dir, max_connections=4, header_timeout_s=30) as live:
        host, port = host_port(live.url)
        held = [await asyncio.open_connection(host, port) for _ in range(4)]
        await asyncio.sleep(0)  # let the proxy accept them
        reader, writer = await asyncio.open_connection(host, port)
        refused = await read_all(reader)
        writer.close()
        for _, w in held:
            w.close()
        # the idle ones gone, calls are served again
        episode = live.create_episode()
        for _ in range(50):
            try:
                r = await openai_client(live, episode.key).chat.completions.create(**OK_CHAT)
                break
            except openai.InternalServerError:  # the proxy has not seen the closes yet
                await asyncio.sleep(0.05)
        assert r.choices[0].message.content
    assert refused.startswith(b"HTTP/1.1 503 ") and b"retry shortly" in refused


async def test_forwarder_connection_cap(tmp_path, tiny_model_dir):
    """The sandbox's bridge to the proxy relays at most `max_connections` at a time; one more is closed at
    once, and the proxy never sees it."""
    async with live_proxy(tmp_path, tiny_model_dir, uds=tmp_path / "proxy.sock"):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.setblocking(False)
        port = sock.getsockname()[1]
        relay = asyncio.create_task(forwarder_serve(sock, str(tmp_path / "proxy.sock"), max_connections=3))
        try:
            held = []
            for _ in range(3):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")  # each relayed: the proxy answers
                held.append((reader, writer))
                assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            assert await read_all(reader) == b""  # closed, unanswered
            for _, w in held:
                w.close()
        finally:
            relay.cancel()
            sock.close()


async def test_calls_in_flight_per_episode_are_capped_and_a_retry_shares_the_call_still_generating(
    tmp_path, tiny_model_dir
):
    gate = tmp_path / "gate"
    async with live_proxy(tmp_path, tiny_model_dir, max_calls_in_flight_per_episode=2) as live:
        episode = live.create_episode()
        tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]

        def body(n: int) -> dict:
            return {"model": "m", "tools": tools, "messages": [{"role": "user", "content": f"call {n} GATE={gate}"}]}

        client = openai_client(live, episode.key)
        first = asyncio.create_task(client.chat.completions.create(**body(1)))
        retry_of_first = asyncio.create_task(client.chat.completions.create(**body(1)))
        second = asyncio.create_task(client.chat.completions.create(**body(2)))
        while live.service.calls.in_flight(episode.id) < 2:
            await asyncio.sleep(0.01)
        with pytest.raises(openai.RateLimitError) as refused:
            await client.chat.completions.create(**body(3))
        assert refused.value.response.headers["retry-after"] == "1"
        gate.write_text("open")
        a, b, c = await asyncio.gather(first, retry_of_first, second)
        calls = live.store.list_calls(episode.id)
    assert a.id == b.id and a.choices[0].message.content == b.choices[0].message.content  # one call, shared
    assert c.id != a.id
    assert len(calls) == 2  # sampled once each: the retry was not sampled again, the refused call left no row


async def test_count_tokens_refuses_what_cannot_fit_without_tokenizing(tmp_path, tiny_model_dir, monkeypatch):
    async with live_proxy(tmp_path, tiny_model_dir) as live:
        episode = live.create_episode()

        def no_render(*args, **kwargs):
            raise AssertionError("tokenized a prompt that cannot fit")

        monkeypatch.setattr(live.service.model, "render", no_render)
        monkeypatch.setattr(live.service.renderer, "render", no_render)
        huge = "word " * (2 * 1024 * 1024)  # 10 MB
        client = anthropic_client(live, episode.key)
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long: at least"):
            await client.messages.count_tokens(model="m", messages=[{"role": "user", "content": huge}])
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long: at least"):
            await client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": huge}])
        assert live.store.count_calls(episode.id) == 0


async def test_a_slow_render_does_not_hold_up_other_episodes(tmp_path, tiny_model_dir):
    """One episode's long prompt takes a long time to render (here: held in its worker thread until
    released); another episode's call is served meanwhile. (A short prompt renders on the loop, in about a
    millisecond: less than the hop to a thread costs.)"""
    async with live_proxy(tmp_path, tiny_model_dir) as live:
        renderer = live.service.renderer
        slow_episode, fast_episode = live.create_episode(), live.create_episode()
        release, rendering = threading.Event(), threading.Event()
        render = renderer.render

        def held_render(episode_id, conversation, side_call=False):
            if episode_id == slow_episode.id:
                rendering.set()
                release.wait(60)
            return render(episode_id, conversation, side_call)

        renderer.render = held_render
        long_chat = {**OK_CHAT, "messages": [{"role": "user", "content": "word " * 8_000}]}  # > 16 KB: a thread
        slow = asyncio.create_task(openai_client(live, slow_episode.key).chat.completions.create(**long_chat))
        while not rendering.is_set():
            await asyncio.sleep(0.01)
        fast = await openai_client(live, fast_episode.key).chat.completions.create(**OK_CHAT)
        served_while_rendering = not release.is_set() and not slow.done()
        release.set()
        await slow
    assert fast.choices[0].message.content and served_while_rendering


RETRY_COUNT_VALUES = [
    b"1",
    b"-1",
    b"abc",
    b"",
    b"1e9",
    b"9" * 4000,
    "\u00b2".encode("latin-1"),
    b"\xff\xfe",
    b"0x10",
    b"\xc2\xb2",
    b" 3 ",
    b"1,2",
    b"NaN",
    b"\t",
]


async def test_any_header_value_gets_a_well_formed_answer_over_a_real_socket(tmp_path, tiny_model_dir):
    """`x-stainless-retry-count` is not read at all (a retry is recognised by its body); any value of it — or of
    the other headers SDKs send — gets a well-formed answer, over HTTP as uvicorn parses it."""
    async with live_proxy(tmp_path, tiny_model_dir) as live:
        episode = live.create_episode()
        host, port = host_port(live.url)
        body = json.dumps(OK_CHAT).encode()
        answers = []
        for name in (b"x-stainless-retry-count", b"anthropic-version", b"x-stainless-timeout", b"openai-beta"):
            for value in RETRY_COUNT_VALUES:
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(
                    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
                    b"authorization: Bearer "
                    + episode.key.encode()
                    + b"\r\n"
                    + name
                    + b": "
                    + value
                    + b"\r\ncontent-type: application/json\r\ncontent-length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
                answers.append((name, value, await read_all(reader)))
                writer.close()
    for name, value, answer in answers:
        status = int(answer.split(b" ", 2)[1])
        if status == 200:
            assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["choices"], (name, value)
        else:  # a value HTTP itself forbids (h11 refuses it before the app): a plain 400, never a 500
            assert status == 400, (name, value, answer[:200])
    assert sum(1 for *_, a in answers if a.startswith(b"HTTP/1.1 200")) >= len(answers) - 8
