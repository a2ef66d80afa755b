"""Images through the proxy, per dialect, with the real proxy app and a real SQLite store: a harness that sends a new
screenshot with every call (and every earlier one again) is served with token continuity, each recorded call gives
back the exact bytes the harness sent, the store holds one copy of each screenshot however many calls sent it, the
text-only model reads the placeholder, and a malformed or oversized image is a 4xx in the harness's own format."""

from __future__ import annotations

import base64
import json

import pytest

from openforge.dialects.base import IMAGE_PLACEHOLDER
from support.images import anthropic_image, b64, chat_image, data_url, png, responses_image
from support.proxy import in_process_proxy

SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}}
SCREENS = 4


@pytest.fixture()
async def proxy(tmp_path, tiny_model_dir):
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, max_image_bytes=64 * 1024) as p:
        yield p


# ---- each dialect's harness: a request, the reply echoed back, and the next screenshot ----------------------------


class Anthropic:
    path = "/v1/messages"

    def body(self, history: list) -> dict:
        tool = {"name": "bash", "description": "Run a command.", "input_schema": SCHEMA}
        return {"model": "m", "max_tokens": 64, "tools": [tool], "messages": history}

    def first(self, shot: bytes) -> list:
        return [{"role": "user", "content": [{"type": "text", "text": "Open the page."}, anthropic_image(shot)]}]

    def follow(self, reply: dict, shot: bytes, k: int) -> list:
        echo = {"role": "assistant", "content": reply["content"]}
        calls = [b for b in reply["content"] if b["type"] == "tool_use"]
        screen = [{"type": "text", "text": f"screen {k}"}, anthropic_image(shot)]
        if calls:  # the screenshot inside the tool's result, as a computer-use tool returns it
            return [
                echo,
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": calls[0]["id"], "content": screen}],
                },
            ]
        return [echo, {"role": "user", "content": screen}]

    def error(self, response) -> tuple[str, str]:
        error = response.json()["error"]
        assert response.json()["type"] == "error"
        return error["type"], error["message"]

    def malformed(self, image: dict) -> list:
        return [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]

    def image(self, encoded: str, media_type: str = "image/png") -> dict:
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": encoded}}


class Responses:
    path = "/v1/responses"

    def body(self, history: list) -> dict:
        tool = {"type": "function", "name": "bash", "description": "Run a command.", "parameters": SCHEMA}
        return {"model": "m", "max_output_tokens": 64, "store": False, "tools": [tool], "input": history}

    def first(self, shot: bytes) -> list:
        content = [{"type": "input_text", "text": "Open the page."}, responses_image(shot)]
        return [{"type": "message", "role": "user", "content": content}]

    def follow(self, reply: dict, shot: bytes, k: int) -> list:
        echo = reply["output"]
        calls = [item for item in echo if item["type"] == "function_call"]
        screen = [{"type": "input_text", "text": f"screen {k}"}, responses_image(shot)]
        if calls:
            return [*echo, {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": screen}]
        return [*echo, {"type": "message", "role": "user", "content": screen}]

    def error(self, response) -> tuple[str, str]:
        error = response.json()["error"]
        return error["code"] or error["type"], error["message"]

    def malformed(self, image: dict) -> list:
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"}, image]}]

    def image(self, encoded: str, media_type: str = "image/png") -> dict:
        return {"type": "input_image", "image_url": f"data:{media_type};base64,{encoded}"}


class Chat:
    path = "/v1/chat/completions"

    def body(self, history: list) -> dict:
        tool = {"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": SCHEMA}}
        return {"model": "m", "max_completion_tokens": 64, "tools": [tool], "messages": history}

    def first(self, shot: bytes) -> list:
        return [{"role": "user", "content": [{"type": "text", "text": "Open the page."}, chat_image(shot)]}]

    def follow(self, reply: dict, shot: bytes, k: int) -> list:
        message = reply["choices"][0]["message"]
        echo = {"role": "assistant", "content": message["content"]}
        if message.get("tool_calls"):
            echo["tool_calls"] = message["tool_calls"]
        screen = [{"type": "text", "text": f"screen {k}"}, chat_image(shot)]
        if message.get("tool_calls"):
            return [echo, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": screen}]
        return [echo, {"role": "user", "content": screen}]

    def error(self, response) -> tuple[str, str]:
        error = response.json()["error"]
        return error["code"] or error["type"], error["message"]

    def malformed(self, image: dict) -> list:
        return [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]

    def image(self, encoded: str, media_type: str = "image/png") -> dict:
        return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{encoded}"}}


HARNESSES = {"anthropic": Anthropic(), "responses": Responses(), "chat_completions": Chat()}


async def post(proxy, key: str, harness, body: bytes):
    async with proxy.http() as http:
        return await http.post(harness.path, content=body, headers={"authorization": f"Bearer {key}"})


@pytest.mark.parametrize("dialect", list(HARNESSES))
async def test_a_conversation_growing_by_screenshots_is_recorded_exactly_and_each_screenshot_once(proxy, dialect):
    harness = HARNESSES[dialect]
    episode_id, key = await proxy.new_episode(task="gui")
    shots = [png(80, 60, seed=k) for k in range(SCREENS)]  # ~14 KB each, incompressible
    history = harness.first(shots[0])
    sent: list[bytes] = []
    for k in range(1, SCREENS + 1):
        body = json.dumps(harness.body(history)).encode()
        response = await post(proxy, key, harness, body)
        assert response.status_code == 200, response.text
        sent.append(body)
        if k < SCREENS:
            history = history + harness.follow(response.json(), shots[k], k)

    calls = proxy.store.list_calls(episode_id)
    assert [c.request_body for c in calls] == sent  # byte for byte what the harness sent
    assert [proxy.store.get_call(episode_id, c.index).request_body for c in calls] == sent
    for call in calls:
        hashes = [image.sha256 for image in call.images]
        assert len(hashes) == call.index + 1  # every earlier screenshot again, and the new one
        for image, shot in zip(call.images, shots):
            assert image.media_type == "image/png" and image.size == len(shot)
            offset, length = image.span
            assert call.request_body[offset : offset + length] == base64.b64encode(shot)
            assert proxy.store.get_image(image.sha256) == ("image/png", shot)

    conn = proxy.store._conn()
    assert conn.execute("SELECT count(*) FROM images").fetchone()[0] == SCREENS  # sent 1+2+3+4 = 10 times
    stored = conn.execute("SELECT sum(length(data)) FROM images").fetchone()[0]
    assert stored == sum(len(s) for s in shots)
    # the stored bodies hold no screenshot: together they are smaller than one screenshot's base64
    bodies = conn.execute("SELECT sum(length(request_body)) FROM calls WHERE episode_id = ?", (episode_id,)).fetchone()[
        0
    ]
    assert bodies < len(b64(shots[0]))

    # the text-only model read placeholders, and the conversation kept its token continuity throughout
    assert all(c.segment == 0 and c.break_reason is None and c.call_error is None for c in calls)
    for before, after in zip(calls, calls[1:]):
        assert (
            after.prompt_ids[: len(before.prompt_ids) + len(before.output_ids)] == before.prompt_ids + before.output_ids
        )
    model = proxy.service.model
    quoted = sum(model.decode(c.output_ids).count(IMAGE_PLACEHOLDER) for c in calls[:-1])  # the policy echoes results
    assert model.decode(calls[-1].prompt_ids).count(IMAGE_PLACEHOLDER) == SCREENS + quoted


@pytest.mark.parametrize("dialect", list(HARNESSES))
async def test_a_malformed_image_is_a_400_in_the_dialects_format_and_nothing_is_recorded(proxy, dialect):
    harness = HARNESSES[dialect]
    episode_id, key = await proxy.new_episode()
    text = base64.b64encode(b"plain text, not an image").decode()
    cases = [
        (harness.image("not base64 at all!"), "not valid base64"),
        (harness.image(text), "is not a PNG"),
        (harness.image(b64(png(4, 4)), "image/jpeg"), "is 'image/jpeg' but the data is 'image/png'"),
        (harness.image(b64(png(4, 4)), "image/bmp"), "must be one of"),
    ]
    for image, says in cases:
        body = json.dumps(harness.body(harness.malformed(image))).encode()
        response = await post(proxy, key, harness, body)
        assert response.status_code == 400, response.text
        kind, message = harness.error(response)
        assert kind == "invalid_request_error" and says in message, (kind, message)
        assert "content[1]" in message  # names the field
    assert proxy.store.count_calls(episode_id) == 0


@pytest.mark.parametrize("dialect", list(HARNESSES))
async def test_an_oversized_image_is_a_413_in_the_dialects_format(proxy, dialect):
    harness = HARNESSES[dialect]
    episode_id, key = await proxy.new_episode()
    big = png(160, 160)  # ~77 KB > max_image_bytes (64 KiB) of this proxy
    body = json.dumps(harness.body(harness.malformed(harness.image(b64(big))))).encode()
    response = await post(proxy, key, harness, body)
    assert response.status_code == 413, response.text
    kind, message = harness.error(response)
    assert kind == "request_too_large" and f"{len(big)} bytes" in message and "max_image_bytes" in message
    assert proxy.store.count_calls(episode_id) == 0
    small = json.dumps(harness.body(harness.malformed(harness.image(b64(png(8, 8)))))).encode()
    assert (await post(proxy, key, harness, small)).status_code == 200


async def test_an_image_by_url_is_read_as_its_placeholder_and_its_url_recorded(proxy):
    harness = HARNESSES["anthropic"]
    episode_id, key = await proxy.new_episode()
    url = "https://example.test/screen.png"
    image = {"type": "image", "source": {"type": "url", "url": url}}
    body = json.dumps(harness.body(harness.malformed(image))).encode()
    assert (await post(proxy, key, harness, body)).status_code == 200
    (call,) = proxy.store.list_calls(episode_id)
    assert [(i.url, i.sha256, i.span) for i in call.images] == [(url, None, None)]
    assert call.request_body == body
    assert IMAGE_PLACEHOLDER in proxy.service.model.decode(call.prompt_ids)


async def test_an_image_whose_base64_the_json_escapes_stays_in_the_body(proxy):
    """A client that escapes `/` in JSON strings: the text is not in the body verbatim, so the body keeps it (and
    the image is still recorded by hash)."""
    harness = HARNESSES["chat_completions"]
    episode_id, key = await proxy.new_episode()
    shot = png(16, 16, seed=7)
    assert "/" in b64(shot)
    body = json.dumps(harness.body(harness.malformed(chat_image(shot)))).replace("/", "\\/").encode()
    assert (await post(proxy, key, harness, body)).status_code == 200
    (call,) = proxy.store.list_calls(episode_id)
    assert call.request_body == body
    assert [(i.sha256 is not None, i.span) for i in call.images] == [(True, None)]
    assert data_url(shot).replace("/", "\\/").encode() in call.request_body
