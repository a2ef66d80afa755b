"""The embedded backend on the real tiny model: sampling, logprobs, batching, prefix reuse, cancellation,
weight loading, limits and bad input."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from openforge.core import FinishReason, SamplingParams
from openforge.inference import GenerationContext, InvalidRequestError, PromptTooLongError, parse_sampling
from openforge.inference.embedded import EmbeddedBackend
from openforge.models import ModelDir
from support.inference import (
    max_abs_diff,
    perturbed_model_dir,
    reference_logprobs,
    short_context_model_dir,
    sliding_window_model_dir,
    tiny_model_dir,
)

CTX = GenerationContext()


@pytest.fixture(scope="module")
def backend():
    b = EmbeddedBackend(tiny_model_dir(), seed=0)
    yield b
    b._engine.close()


@pytest.fixture(scope="module")
def prompt(backend) -> list[int]:
    return backend.model_dir.encode_text("The quick brown fox jumps over the lazy dog. Then it")


async def test_same_seed_same_tokens_different_seed_different_tokens(backend, prompt):
    sampling = SamplingParams(temperature=1.0, max_tokens=24, seed=123)
    first = await backend.generate(prompt, sampling, CTX)
    second = await backend.generate(prompt, sampling, CTX)
    assert first.output_ids == second.output_ids
    assert max_abs_diff(first.logprobs, second.logprobs) < 1e-4  # the second run reuses the cached prompt
    other = await backend.generate(prompt, sampling.model_copy(update={"seed": 124}), CTX)
    assert other.output_ids != first.output_ids


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
async def test_logprobs_equal_a_forward_pass(backend, prompt, temperature):
    sampling = SamplingParams(temperature=temperature, max_tokens=32, seed=5)
    result = await backend.generate(prompt, sampling, CTX)
    assert len(result.logprobs) == len(result.output_ids) > 0
    expected = reference_logprobs(backend.model, prompt, result.output_ids, temperature)
    assert max_abs_diff(result.logprobs, expected) < 1e-4


async def test_logprobs_are_taken_before_top_k_and_top_p(backend, prompt):
    sampling = SamplingParams(temperature=0.8, top_k=5, top_p=0.9, max_tokens=24, seed=9)
    result = await backend.generate(prompt, sampling, CTX)
    expected = reference_logprobs(backend.model, prompt, result.output_ids, 0.8)
    assert max_abs_diff(result.logprobs, expected) < 1e-4  # untruncated distribution
    with torch.inference_mode():
        logits = backend.model(input_ids=torch.tensor([prompt + result.output_ids])).logits[0]
    for i, token in enumerate(result.output_ids):  # yet every token came from the top 5
        top5 = torch.topk(logits[len(prompt) - 1 + i], 5).indices.tolist()
        assert token in top5


async def test_concurrent_requests_complete_and_match_solo_runs(backend):
    texts = ["a", "hello there", "x" * 120, "def f(x):\n    return x", "zz " * 40, "The end."]
    prompts = [backend.model_dir.encode_text(t) for t in texts]
    samplings = [SamplingParams(temperature=1.0, max_tokens=10 + 3 * i, seed=100 + i) for i in range(len(prompts))]
    together = await asyncio.gather(*(backend.generate(p, s, CTX) for p, s in zip(prompts, samplings)))
    for p, s, batched in zip(prompts, samplings, together):
        solo = await backend.generate(p, s, CTX)
        assert batched.output_ids == solo.output_ids
        assert max_abs_diff(batched.logprobs, solo.logprobs) < 1e-4
        assert max_abs_diff(batched.logprobs, reference_logprobs(backend.model, p, batched.output_ids, 1.0)) < 1e-4


async def test_prefix_reuse_gives_the_same_result_as_no_reuse(backend, prompt):
    episode = GenerationContext(episode_id="episode-prefix")
    sampling = SamplingParams(temperature=1.0, max_tokens=16, seed=77)
    first = await backend.generate(prompt, sampling, episode)
    # The harness sends the conversation back: previous prompt + sampled output + a new turn.
    follow_up = prompt + first.output_ids + backend.model_dir.encode_text(" and then what happened?")
    reused = await backend.generate(follow_up, sampling, episode)
    assert reused.timings["prompt_tokens_reused"] == len(prompt) + len(first.output_ids) - 1

    backend.prefix_cache.clear()
    fresh = await backend.generate(follow_up, sampling, episode)
    assert fresh.timings["prompt_tokens_reused"] == 0
    assert fresh.output_ids == reused.output_ids
    assert max_abs_diff(fresh.logprobs, reused.logprobs) < 1e-4


async def test_prefix_is_shared_across_episodes_of_a_group(backend, prompt):
    sampling = SamplingParams(temperature=1.0, max_tokens=4, seed=1)
    await backend.generate(prompt, sampling, GenerationContext(episode_id="group-a"))
    sibling = await backend.generate(prompt, sampling, GenerationContext(episode_id="group-b"))
    assert sibling.timings["prompt_tokens_reused"] == len(prompt) - 1


async def test_stop_token_ids_max_tokens_and_stop_strings(backend, prompt):
    # Seeded sampling draws one number per token, so a run that stops early is a prefix of the free run.
    sampling = SamplingParams(temperature=1.0, max_tokens=16, seed=21)
    free = await backend.generate(prompt, sampling, CTX)
    assert free.finish_reason is FinishReason.length and len(free.output_ids) == 16
    assert len(set(free.output_ids)) > 4

    stop_id = free.output_ids[6]
    first_occurrence = free.output_ids.index(stop_id)
    stopped = await backend.generate(prompt, sampling.model_copy(update={"stop_token_ids": [stop_id]}), CTX)
    assert stopped.finish_reason is FinishReason.stop
    assert stopped.output_ids == free.output_ids[: first_occurrence + 1]  # the stop token is kept

    short = await backend.generate(prompt, sampling.model_copy(update={"max_tokens": 5}), CTX)
    assert short.output_ids == free.output_ids[:5] and short.finish_reason is FinishReason.length

    decode = backend.model_dir.decode
    stop_string = decode(free.output_ids[:9])[len(decode(free.output_ids[:7])) :]
    assert stop_string
    by_string = await backend.generate(prompt, sampling.model_copy(update={"stop": [stop_string]}), CTX)
    assert by_string.finish_reason is FinishReason.stop
    assert by_string.output_ids == free.output_ids[: len(by_string.output_ids)]
    assert stop_string in decode(by_string.output_ids)
    assert stop_string not in decode(by_string.output_ids[:-1])


async def test_cancelling_generate_stops_the_work(backend):
    long_prompt = [7 + (i % 900) for i in range(30_000)]  # ~30 prefill chunks: long enough to cancel midway
    task = asyncio.create_task(backend.generate(long_prompt, SamplingParams(max_tokens=4), CTX))
    deadline = time.monotonic() + 10
    while backend.active_jobs == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    assert backend.active_jobs == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 2
    while backend.active_jobs and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    assert backend.active_jobs == 0  # dropped after at most one more chunk, not after the whole prompt
    quick = await asyncio.wait_for(backend.generate([5, 6, 7], SamplingParams(max_tokens=3), CTX), 5)
    assert len(quick.output_ids) <= 3


async def test_cancelling_during_decode_leaves_the_batch_working(backend, prompt):
    greedy = SamplingParams(temperature=0.0, max_tokens=2000)
    doomed = asyncio.create_task(backend.generate(prompt, greedy, CTX))
    survivor = asyncio.create_task(backend.generate(prompt[:5], SamplingParams(max_tokens=30, seed=3), CTX))
    await asyncio.sleep(0.2)
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    result = await asyncio.wait_for(survivor, 10)
    solo = await backend.generate(prompt[:5], SamplingParams(max_tokens=30, seed=3), CTX)
    assert result.output_ids == solo.output_ids


async def test_load_weights_switches_the_policy():
    backend = EmbeddedBackend(tiny_model_dir(), seed=0, max_batch=2)
    try:
        prompt = backend.model_dir.encode_text("Weights change, logprobs follow.")
        sampling = SamplingParams(temperature=1.0, max_tokens=16, seed=11)
        # Queued before the swap: the two started finish under the old weights; the three waiting for room (not
        # started) run under the new ones, without a drain of their own.
        queued = [
            asyncio.create_task(
                backend.generate(prompt, sampling.model_copy(update={"max_tokens": 48, "seed": i}), CTX)
            )
            for i in range(5)
        ]
        deadline = time.monotonic() + 30
        while backend.active_jobs < 2 and time.monotonic() < deadline:  # two started, three waiting for room
            await asyncio.sleep(0.001)
        version = await backend.load_weights(str(perturbed_model_dir()))
        assert version == backend.policy_version == 1
        results = [await t for t in queued]
        versions = [r.policy_version for r in results]  # in the order they started
        assert versions[:2] == [0, 0] and versions[-1] == 1 and versions == sorted(versions), versions
        new_model = ModelDir(perturbed_model_dir()).load_model()
        old_model = ModelDir(tiny_model_dir()).load_model()
        for r in results:  # each from its own weights, none from a cache the other weights left
            model = new_model if r.policy_version else old_model
            assert max_abs_diff(r.logprobs, reference_logprobs(model, prompt, r.output_ids, 1.0)) < 1e-4

        after = await backend.generate(prompt, sampling, CTX)
        assert after.policy_version == 1
        assert max_abs_diff(after.logprobs, reference_logprobs(new_model, prompt, after.output_ids, 1.0)) < 1e-4
        assert max_abs_diff(after.logprobs, reference_logprobs(old_model, prompt, after.output_ids, 1.0)) > 1e-3

        with pytest.raises(InvalidRequestError, match="safetensors"):
            await backend.load_weights(str(tiny_model_dir() / "no-such-dir"))
        assert backend.policy_version == 1
    finally:
        await backend.close()


async def test_output_is_clamped_to_the_context():
    backend = EmbeddedBackend(short_context_model_dir(64), seed=0)
    try:
        result = await backend.generate(list(range(10, 70)), SamplingParams(temperature=0.0, max_tokens=100), CTX)
        assert len(result.output_ids) <= 4
        if len(result.output_ids) == 4:
            assert result.finish_reason is FinishReason.length
        with pytest.raises(PromptTooLongError, match="64"):
            await backend.generate(list(range(10, 74)), SamplingParams(), CTX)
    finally:
        await backend.close()


async def test_bad_requests_are_refused_clearly(backend):
    with pytest.raises(InvalidRequestError, match="empty"):
        await backend.generate([], SamplingParams(), CTX)
    with pytest.raises(PromptTooLongError, match="131072"):
        await backend.generate([5] * backend.max_context, SamplingParams(), CTX)
    with pytest.raises(InvalidRequestError, match="outside the vocabulary"):
        await backend.generate([5, backend.vocab_size + 3], SamplingParams(), CTX)
    with pytest.raises(InvalidRequestError, match="outside the vocabulary"):
        await backend.generate([5, -1], SamplingParams(), CTX)
    with pytest.raises(InvalidRequestError, match="temperature"):
        await backend.generate(
            [5, 6], SamplingParams.model_construct(**{**SamplingParams().model_dump(), "temperature": -1.0}), CTX
        )
    with pytest.raises(InvalidRequestError, match="temperature: -1"):
        parse_sampling({"temperature": -1})
    with pytest.raises(InvalidRequestError, match="top_p: 0"):
        parse_sampling({"top_p": 0})
    with pytest.raises(InvalidRequestError, match="max_tokens"):
        parse_sampling({"max_tokens": 0})


async def test_a_sliding_window_model_is_served_exactly():
    """Sliding-window layers keep every token in the engine's caches and the model's masks apply the window:
    prompts longer than it, read together, in chunks, and continued from an episode's cached prefix, give the
    logprobs of one full forward pass."""
    window = 16
    backend = EmbeddedBackend(sliding_window_model_dir(window), seed=0, prefill_chunk=40)
    try:
        md = backend.model_dir
        system = md.encode_text("You are a careful agent. Run one command, then answer. " * 3)
        prompts = [system + md.encode_text(f"Task {i}: write {7 * i} to out/f{i}.txt now.") for i in range(4)]
        prompts.append(system * 3 + md.encode_text("A long task read in chunks."))
        assert min(map(len, prompts)) > 3 * window
        sampling = SamplingParams(temperature=1.0, max_tokens=24, seed=3)
        results = await asyncio.gather(
            *(backend.generate(p, sampling, GenerationContext(episode_id=f"e{i}")) for i, p in enumerate(prompts))
        )
        for p, r in zip(prompts, results):
            assert max_abs_diff(r.logprobs, reference_logprobs(backend.model, p, r.output_ids, 1.0)) < 1e-4
        # the episode's next call starts from its cached prompt and output
        follow = prompts[0] + results[0].output_ids + md.encode_text(" Result: ok.")
        again = await backend.generate(follow, sampling, GenerationContext(episode_id="e0"))
        assert max_abs_diff(again.logprobs, reference_logprobs(backend.model, follow, again.output_ids, 1.0)) < 1e-4
        # and the window is real: nothing older than layers x window tokens reaches the last logits
        layers = backend.model.config.num_hidden_layers
        ids = torch.randint(10, 500, (1, layers * window + 40))
        changed = ids.clone()
        changed[0, :30] = torch.randint(10, 500, (30,))
        with torch.inference_mode():
            assert torch.equal(
                backend.model(input_ids=ids).logits[0, -1], backend.model(input_ids=changed).logits[0, -1]
            )
    finally:
        backend._engine.close()
