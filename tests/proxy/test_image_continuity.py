"""Token continuity for a conversation that grows by a screenshot per call: a text-only model reads each image's
placeholder; a model whose chat template takes images (detected from the template) gets each image as a content item
where its placeholder was, and an image's hash is part of what a message means to it.

The image-taking template below has the shape of Qwen2-VL's (content items, `<|vision_start|><|image_pad|>
<|vision_end|>` per image) on the tiny model's tokenizer: it checks the rendering, not a real vision model's image
tokens or pixels (unverified here: no vision model, no GPU)."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from openforge.core import Conversation, ImageRef, Message
from openforge.dialects.base import BLOCK_SEPARATOR, IMAGE_PLACEHOLDER
from openforge.models import ModelDir
from openforge.proxy.continuity import ContinuityRenderer
from openforge.proxy.output_parser import parse_output

VISION_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
IMAGE_MARK = "<|vision_start|><|image_pad|><|vision_end|>"


@pytest.fixture(scope="module")
def vision_model(tiny_model_dir, tmp_path_factory) -> ModelDir:
    out = tmp_path_factory.mktemp("vision") / "model"
    shutil.copytree(tiny_model_dir, out)
    (out / "chat_template.jinja").write_text(VISION_TEMPLATE)
    return ModelDir(out)


def screen(k: int, *, seed: int | None = None) -> Message:
    """A user message: a caption and screenshot k (`seed` picks other bytes for it)."""
    text = f"screen {k}"
    digest = hashlib.sha256(f"shot-{k if seed is None else seed}".encode()).hexdigest()
    image = ImageRef(
        offset=len(text + BLOCK_SEPARATOR),
        length=len(IMAGE_PLACEHOLDER),
        sha256=digest,
        media_type="image/png",
        size=10,
    )
    return Message(role="user", content=text + BLOCK_SEPARATOR + IMAGE_PLACEHOLDER, images=[image])


def play(model: ModelDir, renderer: ContinuityRenderer, calls: int, history_for=None):
    """A harness that adds a new screenshot with each call; returns each call's rendered prompt and output ids."""
    messages = [screen(0)]
    served = []
    for k in range(calls):
        if history_for is not None:
            messages = history_for(k, messages)
        rendered = renderer.render("ep", Conversation(system="Drive the browser.", messages=list(messages)))
        text = f"I see screen {k}."
        output = model.encode_completion(text + "<|im_end|>")
        renderer.record("ep", k, rendered, output, parse_output(text, tools=[]))
        served.append((rendered, output))
        messages += [Message(role="assistant", content=text), screen(k + 1)]
    return served


def test_the_template_decides_whether_a_model_takes_images(tiny_model, vision_model):
    assert vision_model.takes_images and not tiny_model.takes_images
    conversation = Conversation(messages=[screen(0), Message(role="assistant", content="ok"), screen(1)])
    as_text = tiny_model.render_text(conversation)
    assert as_text.count(IMAGE_PLACEHOLDER) == 2 and "vision_start" not in as_text
    with_images = vision_model.render_text(conversation)
    assert with_images.count(IMAGE_MARK) == 2 and IMAGE_PLACEHOLDER not in with_images
    assert "screen 0" + BLOCK_SEPARATOR + IMAGE_MARK in with_images  # each image where its placeholder was


@pytest.mark.parametrize("which", ["text-only", "takes images"])
def test_a_conversation_growing_by_screenshots_keeps_its_continuity(tiny_model, vision_model, which):
    model = tiny_model if which == "text-only" else vision_model
    renderer = ContinuityRenderer(model)
    served = play(model, renderer, calls=5)
    for (before, out), (after, _) in zip(served, served[1:]):
        assert after.break_reason is None and after.segment == 0
        assert after.prompt_ids[: len(before.prompt_ids) + len(out)] == before.prompt_ids + out
        assert after.reused_tokens == len(before.prompt_ids) + len(out)
    last = model.decode(served[-1][0].prompt_ids)
    assert last.count(IMAGE_PLACEHOLDER if which == "text-only" else IMAGE_MARK) == 5
    # the last conversation rendered from scratch gives the same ids: appending changed nothing
    messages = [screen(0)]
    for k in range(4):
        messages += [Message(role="assistant", content=f"I see screen {k}."), screen(k + 1)]
    assert model.render(Conversation(system="Drive the browser.", messages=messages)) == served[-1][0].prompt_ids


def test_a_replaced_screenshot_breaks_continuity_only_for_a_model_that_sees_it(tiny_model, vision_model):
    """A harness that swaps an earlier screenshot for another (same caption, other bytes) from the third call on."""

    def swap_first(k, messages):
        return [screen(0, seed=99), *messages[1:]] if k == 2 else messages

    text_only = play(tiny_model, ContinuityRenderer(tiny_model), calls=3, history_for=swap_first)
    assert text_only[2][0].break_reason is None  # it reads the same placeholder either way
    sees = play(vision_model, ContinuityRenderer(vision_model), calls=3, history_for=swap_first)
    assert sees[2][0].break_reason == "history_rewritten"
