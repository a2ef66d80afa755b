"""The scripted backend: turns replayed per episode, Python policies, control markup as control tokens."""

from __future__ import annotations

import json

import pytest

from openforge.core import Conversation, FinishReason, Message, SamplingParams
from openforge.inference import GenerationContext, InvalidRequestError, make_backend
from openforge.inference.scripted import ScriptedBackend, ScriptError
from openforge.models import ModelDir
from support.inference import tiny_model_dir

PROMPT = [5, 6, 7]
SAMPLING = SamplingParams(max_tokens=200)
TOOL_CALL = '<tool_call>{"name": "exec", "arguments": {"command": "ls"}}</tool_call>'


@pytest.fixture(scope="module")
def model_dir() -> ModelDir:
    return ModelDir(tiny_model_dir())


def ctx(episode: str, side: bool = False, **kw) -> GenerationContext:
    return GenerationContext(episode_id=episode, side_call=side, **kw)


async def test_json_turns_replay_per_episode(tmp_path, model_dir):
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": ["Let me look.\n" + TOOL_CALL, "Done: 42."], "side": "A title"}))
    backend = make_backend(f"scripted:{script}", model_dir)
    assert isinstance(backend, ScriptedBackend)

    first = await backend.generate(PROMPT, SAMPLING, ctx("e1"))
    side = await backend.generate(PROMPT, SAMPLING, ctx("e1", side=True))  # does not consume a turn
    second = await backend.generate(PROMPT, SAMPLING, ctx("e1"))
    third = await backend.generate(PROMPT, SAMPLING, ctx("e1"))  # past the end: the last turn repeats
    other_episode = await backend.generate(PROMPT, SAMPLING, ctx("e2"))  # episodes count separately

    end = model_dir.tokenizer.token_to_id("<|im_end|>")
    assert model_dir.decode(first.output_ids) == "Let me look.\n" + TOOL_CALL + "<|im_end|>"
    assert model_dir.decode(side.output_ids) == "A title<|im_end|>"
    assert model_dir.decode(second.output_ids) == "Done: 42.<|im_end|>"
    assert third.output_ids == second.output_ids
    assert other_episode.output_ids == first.output_ids
    for r in (first, side, second, third):
        assert r.output_ids[-1] == end and r.finish_reason is FinishReason.stop
        assert r.logprobs == [0.0] * len(r.output_ids)


async def test_control_markup_becomes_control_tokens(tmp_path, model_dir):
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": ["<think>hmm</think>" + TOOL_CALL]}))
    result = await make_backend(f"scripted:{script}", model_dir).generate(PROMPT, SAMPLING, ctx("e"))
    for token in ("<think>", "</think>", "<tool_call>", "</tool_call>"):
        assert model_dir.tokenizer.token_to_id(token) in result.output_ids
    # ...unlike plain-text encoding of the same characters, which is how message content is encoded.
    assert model_dir.tokenizer.token_to_id("<tool_call>") not in model_dir.encode_text(TOOL_CALL)


async def test_max_tokens_truncates_and_reports_length(tmp_path, model_dir):
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": ["a fairly long reply that needs many tokens"]}))
    backend = make_backend(f"scripted:{script}", model_dir)
    result = await backend.generate(PROMPT, SamplingParams(max_tokens=3), ctx("e"))
    assert len(result.output_ids) == 3 and result.finish_reason is FinishReason.length


async def test_python_policy_sees_conversation_index_and_task(tmp_path, model_dir):
    script = tmp_path / "policy.py"
    script.write_text(
        "def respond(conversation, call_index, task):\n"
        "    last = conversation.messages[-1].content if conversation else ''\n"
        "    return f\"{call_index}:{task['id']}:{last}\"\n"
    )
    backend = make_backend(f"scripted:{script}", model_dir)
    conv = Conversation(messages=[Message(role="user", content="hi")])
    r0 = await backend.generate(PROMPT, SAMPLING, ctx("e", conversation=conv, task={"id": "t1"}))
    r1 = await backend.generate(PROMPT, SAMPLING, ctx("e", conversation=conv, task={"id": "t1"}))
    assert model_dir.decode(r0.output_ids) == "0:t1:hi<|im_end|>"
    assert model_dir.decode(r1.output_ids) == "1:t1:hi<|im_end|>"

    two_args = tmp_path / "two.py"
    two_args.write_text("def respond(conversation, call_index):\n    return 'call %d' % call_index\n")
    r = await make_backend(f"scripted:{two_args}", model_dir).generate(PROMPT, SAMPLING, ctx("e"))
    assert model_dir.decode(r.output_ids) == "call 0<|im_end|>"


def test_bad_scripts_and_specs_are_named(tmp_path, model_dir):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"turns": []}')
    with pytest.raises(ScriptError, match="turns"):
        ScriptedBackend(bad_json, model_dir)
    no_respond = tmp_path / "none.py"
    no_respond.write_text("x = 1\n")
    with pytest.raises(ScriptError, match="respond"):
        ScriptedBackend(no_respond, model_dir)
    with pytest.raises(ScriptError, match="does not exist"):
        ScriptedBackend(tmp_path / "missing.json", model_dir)
    for spec in ("gpt4", "vllm:", "vllm:localhost:8000", "scripted:", "embedded:x"):
        with pytest.raises(InvalidRequestError, match="embedded, vllm:URL, sglang:URL, scripted:FILE"):
            make_backend(spec, model_dir)
