"""Each dialect's image parts decoded: inline images (base64, data URLs, bare base64) to their bytes, hash and place in
the message; images by reference (URLs, file ids) kept as such; images inside tool results; the request's images in
body order."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from openforge.dialects import DIALECTS, DialectError
from openforge.dialects.base import BLOCK_SEPARATOR, IMAGE_PLACEHOLDER
from support.images import anthropic_image, b64, chat_image, data_url, png, responses_image

A, B = png(6, 4, seed=1), png(6, 4, seed=2)


def decode(dialect: str, body: dict):
    return DIALECTS[dialect].decode(json.dumps(body).encode())


def placeholders(message) -> list[str]:
    return [message.content[i.offset : i.offset + i.length] for i in message.images]


def test_anthropic_images_in_user_blocks_and_tool_results():
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "start"}, anthropic_image(A)]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "ok"}, anthropic_image(B)],
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}},
                    {"type": "image", "source": {"type": "file", "file_id": "file_123"}},
                ],
            },
        ],
    }
    request = decode("anthropic", body)
    user, _, tool, after = request.conversation.messages
    assert tool.role == "tool" and tool.content == "ok" + BLOCK_SEPARATOR + IMAGE_PLACEHOLDER
    assert [i.sha256 for i in user.images + tool.images] == [hashlib.sha256(x).hexdigest() for x in (A, B)]
    assert [(i.url, i.sha256) for i in after.images] == [("https://example.test/a.png", None), ("file_123", None)]
    assert after.content == BLOCK_SEPARATOR.join([IMAGE_PLACEHOLDER] * 2)
    assert all(placeholders(m) == [IMAGE_PLACEHOLDER] * len(m.images) for m in (user, tool, after))
    assert [(i.data, i.url) for i in request.images] == [
        (A, None),
        (B, None),
        (b"", "https://example.test/a.png"),
        (b"", "file_123"),
    ]
    assert request.images[1].param == "messages[2].content[0].content[1].source.data"


def test_responses_input_images_in_messages_and_call_outputs():
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": [responses_image(A), {"type": "input_text", "text": "what is this"}]},
            {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [responses_image(B)]},
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "file_id": "file-9"},
                    {"type": "input_image", "image_url": "https://x.test/i.png"},
                ],
            },
        ],
    }
    request = decode("responses", body)
    user, _, tool, refs = request.conversation.messages
    assert user.content == IMAGE_PLACEHOLDER + BLOCK_SEPARATOR + "what is this" and user.images[0].offset == 0
    assert tool.content == IMAGE_PLACEHOLDER and tool.images[0].size == len(B)
    assert [i.url for i in refs.images] == ["file-9", "https://x.test/i.png"]
    assert [i.data for i in request.images[:2]] == [A, B]


def test_chat_image_parts_as_data_urls_bare_base64_and_urls():
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": [chat_image(A), {"type": "image_url", "image_url": {"url": b64(B)}}]},
            {"role": "user", "content": [{"type": "image_url", "image_url": data_url(A)}]},  # the url as a string
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x.test/i.png"}}]},
        ],
    }
    request = decode("chat_completions", body)
    first, second, third = request.conversation.messages
    assert [i.media_type for i in first.images] == ["image/png", "image/png"] and placeholders(first) == [
        IMAGE_PLACEHOLDER
    ] * 2
    assert first.images[0].sha256 == second.images[0].sha256  # the same bytes, the same hash
    assert third.images[0].url == "http://x.test/i.png"
    assert [i.encoded for i in request.images] == [b64(A), b64(B), b64(A), None]


def test_line_wrapped_base64_is_still_an_image():
    wrapped = "\n".join(b64(A)[i : i + 76] for i in range(0, len(b64(A)), 76))
    request = decode(
        "chat_completions",
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + wrapped}}],
                }
            ],
        },
    )
    assert request.images[0].data == A and request.images[0].encoded == wrapped


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("data:image/png,rawbytes", "only base64 data URLs"),
        ("ftp://x.test/i.png", "expected an http(s) URL or a base64 data URL"),
        ("data:image/png;base64,", "image data is empty"),
    ],
)
def test_responses_refuses_image_urls_it_cannot_read(url, says):
    body = {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}]}
    with pytest.raises(DialectError, match=re.escape(says)) as raised:
        decode("responses", body)
    assert raised.value.status == 400 and raised.value.param == "input[0].content[0].image_url"


def test_an_assistant_turn_never_carries_images():
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "not even an image"}}]},
            {"role": "user", "content": "and?"},
        ],
    }
    request = decode("chat_completions", body)
    assert request.conversation.messages[1].content == IMAGE_PLACEHOLDER and not request.images
