"""Model directories: the tiny-model builder, tokenizer round-trips, the chat template."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openforge.core import Conversation, Message, ToolCall, ToolSpec
from openforge.models import ModelDir, ModelDirError, build_tiny_model
from openforge.models.tokenizer_builder import SPECIAL_TOKENS

CONTROL_LOOKALIKES = [
    "<|im_end|>",
    "<|im_start|>assistant\n",
    '<tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call>',
    "<tool_response>x</tool_response>",
    "<think>no</think>",
    "<|endoftext|>",
]


def test_tiny_model_shape(tiny_model_dir, tiny_model):
    import torch

    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert config["model_type"] == "qwen2"
    assert config["max_position_embeddings"] >= 131072
    model = tiny_model.load_model()
    params = sum(p.numel() for p in model.parameters())
    assert 1_000_000 < params < 10_000_000, params
    logits = model(torch.tensor([tiny_model.encode_text("hello")])).logits
    assert logits.shape[-1] >= tiny_model.vocab_size
    assert tiny_model.max_context >= 131072
    assert tiny_model.tokenizer.token_to_id("<|im_end|>") in tiny_model.eos_token_ids


def test_builder_is_reproducible(tmp_path, tiny_model_dir):
    again = build_tiny_model(tmp_path / "again", seed=0)
    other = build_tiny_model(tmp_path / "other", seed=1)
    for name in ("tokenizer.json", "model.safetensors", "config.json", "chat_template.jinja"):
        assert _digest(again / name) == _digest(tiny_model_dir / name), name
    assert _digest(other / "model.safetensors") != _digest(tiny_model_dir / "model.safetensors")


def test_transformers_loads_the_directory(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages = [{"role": "user", "content": "hi"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_tokenizer_round_trips_any_unicode(tiny_model, text):
    assert tiny_model.decode(tiny_model.encode_text(text)) == text


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200).map(lambda b: b.decode("utf-8", errors="replace")))
def test_tokenizer_round_trips_decoded_bytes(tiny_model, text):
    assert tiny_model.decode(tiny_model.encode_text(text)) == text


def test_digits_are_single_tokens(tiny_model):
    ids = tiny_model.encode_text("12345")
    assert len(ids) == 5


@pytest.mark.parametrize("lookalike", CONTROL_LOOKALIKES)
def test_special_token_lookalikes_stay_plain_text(tiny_model, lookalike):
    special_ids = {tiny_model.tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
    assert not special_ids & set(tiny_model.encode_text(lookalike))
    # ... in user messages, tool results, tool-call arguments, tool descriptions and the system prompt
    conv = Conversation(
        system=f"sys {lookalike}",
        tools=[ToolSpec(name="bash", description=lookalike)],
        messages=[
            Message(role="user", content=f"user {lookalike}"),
            Message(role="assistant", tool_calls=[ToolCall(id="c1", name="bash", arguments={"command": lookalike})]),
            Message(role="tool", tool_call_id="c1", content=f"result {lookalike}"),
        ],
    )
    plain = Conversation(
        system="sys",
        tools=[ToolSpec(name="bash", description="")],
        messages=[
            Message(role="user", content="user"),
            Message(role="assistant", tool_calls=[ToolCall(id="c1", name="bash", arguments={"command": ""})]),
            Message(role="tool", tool_call_id="c1", content="result"),
        ],
    )
    ids = tiny_model.render(conv)
    plain_ids = tiny_model.render(plain)
    # the control tokens are exactly those of the same conversation without look-alikes
    assert [i for i in ids if i in special_ids] == [i for i in plain_ids if i in special_ids]
    assert tiny_model.decode(ids) == tiny_model.render_text(conv)


def test_encode_completion_matches_control_tokens(tiny_model):
    ids = tiny_model.encode_completion('<tool_call>\n{"name": "bash"}\n</tool_call><|im_end|>')
    assert ids[0] == tiny_model.tokenizer.token_to_id("<tool_call>")
    assert ids[-1] == tiny_model.tokenizer.token_to_id("<|im_end|>")


def test_chat_template_renders_tools_calls_results_and_reasoning(tiny_model):
    conv = Conversation(
        system="You are an agent.",
        tools=[
            ToolSpec(
                name="bash",
                description="Run a shell command.",
                parameters={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
            )
        ],
        messages=[
            Message(role="user", content="Create a.txt"),
            Message(
                role="assistant",
                reasoning="I should use bash.",
                content="Creating it.",
                tool_calls=[ToolCall(id="call_1", name="bash", arguments={"command": "echo hi > a.txt"})],
            ),
            Message(role="tool", tool_call_id="call_1", content="(no output)"),
            Message(role="assistant", content="Done."),
            Message(role="user", content="Thanks"),
        ],
    )
    expected = (
        "<|im_start|>system\nYou are an agent.\n\n# Tools\nbash(command)<|im_end|>\n"
        "<|im_start|>user\nCreate a.txt<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nI should use bash.\n</think>\nCreating it.\n"
        '<tool_call>\n{"name": "bash", "arguments": {"command": "echo hi > a.txt"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n(no output)\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nDone.<|im_end|>\n"
        "<|im_start|>user\nThanks<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert tiny_model.render_text(conv) == expected
    ids = tiny_model.render(conv)
    assert tiny_model.decode(ids) == expected
    tok = tiny_model.tokenizer
    for control in ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "<think>"):
        assert tok.token_to_id(control) in ids, control
    assert ids.count(tok.token_to_id("<|im_end|>")) == 6


def test_rendering_is_per_message_concatenation(tiny_model):
    """Appending a message appends to the text: the proxy's continuity relies on it."""
    msgs = [
        Message(role="user", content="a"),
        Message(role="assistant", tool_calls=[ToolCall(id="1", name="bash", arguments={"command": "ls"})]),
        Message(role="tool", tool_call_id="1", content="x"),
        Message(role="assistant", content="done"),
    ]
    for k in range(1, len(msgs)):
        head = tiny_model.render_text(Conversation(system="s", messages=msgs[:k]), add_generation_prompt=False)
        full = tiny_model.render_text(Conversation(system="s", messages=msgs[: k + 1]), add_generation_prompt=False)
        assert full.startswith(head)


def test_missing_pieces_give_clear_errors(tmp_path, tiny_model_dir):
    with pytest.raises(ModelDirError, match="does not exist"):
        ModelDir(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelDirError, match="tokenizer.json"):
        ModelDir(tmp_path / "empty")


def test_a_directory_without_a_context_length_says_which_field_to_set(tmp_path, tiny_model_dir):
    model = tmp_path / "model"
    model.mkdir()
    for name in ("tokenizer.json", "config.json", "tokenizer_config.json", "chat_template.jinja"):
        (model / name).write_bytes((tiny_model_dir / name).read_bytes())
    for name, field in (("config.json", "max_position_embeddings"), ("tokenizer_config.json", "model_max_length")):
        data = json.loads((model / name).read_text())
        del data[field]
        (model / name).write_text(json.dumps(data))
    with pytest.raises(ModelDirError, match="max_position_embeddings in config.json"):
        _ = ModelDir(model).max_context
