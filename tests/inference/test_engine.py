"""The embedded engine's scheduling on the real tiny model: prompts admitted together are read in one forward
pass, and that pass, like reusing another episode's cached prefix, gives the logits and caches of reading each
prompt alone."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from openforge.core import SamplingParams
from openforge.inference import GenerationContext
from openforge.inference.embedded import EmbeddedBackend
from support.inference import max_abs_diff, reference_logprobs, tiny_model_dir

ENGINE_THREAD = "openforge-embedded-engine"


class RecordingModel:
    """Wraps the engine's model: records (input_ids, logits) of every forward pass the engine thread makes, and
    can hold the engine at its next forward pass (to queue several requests while it is busy)."""

    def __init__(self, model):
        self.model = model
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.open = threading.Event()
        self.open.set()
        self.held = threading.Event()

    def __getattr__(self, name):  # config, forward (its signature), load_state_dict, ...
        return getattr(self.model, name)

    def __call__(self, **kwargs):
        engine = threading.current_thread().name == ENGINE_THREAD
        if engine and not self.open.is_set():
            self.held.set()
            self.open.wait(30)
        out = self.model(**kwargs)
        if engine:
            self.calls.append((kwargs["input_ids"].clone(), out.logits.clone()))
        return out

    def prefills(self) -> list[torch.Tensor]:
        """input_ids of the recorded forward passes that read prompts (more than one token per row)."""
        return [ids for ids, _ in self.calls if ids.shape[1] > 1]


def recording_backend(**options) -> tuple[EmbeddedBackend, RecordingModel]:
    backend = EmbeddedBackend(tiny_model_dir(), seed=0, **options)
    recorder = RecordingModel(backend._engine.model)
    backend._engine.model = recorder  # read by the engine at each forward pass
    return backend, recorder


async def generate_together(backend, recorder, prompts, samplings, episodes):
    """Hold the engine in a forward pass of a small request, queue all `prompts`, then let it go: they are
    admitted in the same engine turn."""
    recorder.open.clear()
    blocker = asyncio.create_task(
        backend.generate([5, 6, 7], SamplingParams(max_tokens=2, seed=0), GenerationContext())
    )
    assert await asyncio.to_thread(recorder.held.wait, 30)
    tasks = [
        asyncio.create_task(backend.generate(p, s, GenerationContext(episode_id=e)))
        for p, s, e in zip(prompts, samplings, episodes)
    ]
    await asyncio.sleep(0.1)  # every task has submitted its job
    recorder.calls.clear()  # the engine is inside the blocker's forward pass: the next call recorded
    recorder.open.set()
    await blocker
    results = await asyncio.gather(*tasks)
    del recorder.calls[0]  # ... is that forward pass
    return results


def solo_logits(model, prompt: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([prompt])).logits[0, -1].float()


def solo_kv(model, tokens: list[int]):
    with torch.inference_mode():
        cache = model(input_ids=torch.tensor([tokens]), use_cache=True).past_key_values
    return [(layer.keys, layer.values) for layer in cache.layers]


@pytest.fixture(scope="module")
def texts():
    system = "You are a helpful coding agent. Use the tools, run the tests, and answer briefly. " * 2
    return system, [" Fix the parser.", " Rename module foo to bar and update every import.", " Hi"]


async def test_prompts_admitted_together_are_read_in_one_forward_pass_with_solo_logits(texts):
    backend, recorder = recording_backend()
    try:
        system, users = texts
        encode = backend.model_dir.encode_text
        # A cached system prompt (another episode's), so the rows start from different cached prefixes.
        warm = GenerationContext(episode_id="warm")
        await backend.generate(encode(system + " Warm up."), SamplingParams(max_tokens=2, seed=1), warm)
        prompts = [encode(system + u) for u in users] + [encode("Something else entirely, nothing shared.")]
        prompts.append(encode(system[:40] + " A prompt sharing only part of the system prompt."))
        samplings = [SamplingParams(temperature=1.0, max_tokens=12, seed=40 + i) for i in range(len(prompts))]
        episodes = [f"together-{i}" for i in range(len(prompts))]
        results = await generate_together(backend, recorder, prompts, samplings, episodes)

        prefills = [(ids, logits) for ids, logits in recorder.calls if ids.shape[1] > 1]
        assert len(prefills) == 1 and prefills[0][0].shape[0] == len(prompts)  # one forward pass for all
        reused = [int(r.timings["prompt_tokens_reused"]) for r in results]
        assert reused[0] > len(encode(system)) - 4 and reused[3] == 0 and 0 < reused[4] < reused[0]

        # Each row's logits are those of its prompt read alone, without cache or padding.
        _, logits = prefills[0]
        rests = [len(p) - n for p, n in zip(prompts, reused)]
        last = sorted({n - 1 for n in rests})
        for i, prompt in enumerate(prompts):
            row = logits[i, -1] if last == [max(rests) - 1] else logits[i, last.index(rests[i] - 1)]
            assert (row.float() - solo_logits(recorder.model, prompt)).abs().max() < 1e-4

        # ... and so are the logprobs of everything sampled afterwards (decoded in a left-padded batch), and
        # the same seeds sample the same tokens one request at a time.
        for prompt, sampling, result in zip(prompts, samplings, results):
            expected = reference_logprobs(recorder.model, prompt, result.output_ids, 1.0)
            assert max_abs_diff(result.logprobs, expected) < 1e-4
            solo = await backend.generate(prompt, sampling, GenerationContext())
            assert solo.output_ids == result.output_ids
    finally:
        await backend.close()


async def test_cascade_attention_reads_prompts_behind_a_cached_shared_prefix_once_with_solo_logits(texts):
    """With `cascade_attention`, prompts read together behind a cached prefix they all share hold only their own
    tokens in the forward pass's cache; the prefix is read once beside them. Each row's logits, the caches kept
    for later calls (prefix included) and the logprobs of what is sampled afterwards are those of reading each
    prompt alone."""
    from openforge.inference import engine as engine_module

    backend, recorder = recording_backend(cascade_attention=True)
    shared_lengths = []
    shared_prefix = engine_module.Engine._shared_prefix

    def recording_shared_prefix(self, jobs):
        shared = shared_prefix(self, jobs)
        shared_lengths.append(len(shared[0][0][0, 0]) if shared else 0)
        return shared

    engine_module.Engine._shared_prefix = recording_shared_prefix
    try:
        system, users = texts
        encode = backend.model_dir.encode_text
        warm = GenerationContext(episode_id="warm")
        await backend.generate(encode(system * 3), SamplingParams(max_tokens=2, seed=1), warm)
        prompts = [encode(system * 3 + u) for u in users]
        samplings = [SamplingParams(temperature=1.0, max_tokens=10, seed=50 + i) for i in range(len(prompts))]
        results = await generate_together(backend, recorder, prompts, samplings, [f"c{i}" for i in prompts[0][:3]])
        assert max(shared_lengths) >= 64  # the shared path was taken
        prefills = [(ids, logits) for ids, logits in recorder.calls if ids.shape[1] > 1]
        assert len(prefills) == 1 and prefills[0][0].shape[0] == len(prompts)
        _, logits = prefills[0]
        rests = [len(p) - int(r.timings["prompt_tokens_reused"]) for p, r in zip(prompts, results)]
        last = sorted({n - 1 for n in rests})
        for i, prompt in enumerate(prompts):
            row = logits[i, -1] if last == [max(rests) - 1] else logits[i, last.index(rests[i] - 1)]
            assert (row.float() - solo_logits(recorder.model, prompt)).abs().max() < 1e-4
        for prompt, result in zip(prompts, results):
            expected = reference_logprobs(recorder.model, prompt, result.output_ids, 1.0)
            assert max_abs_diff(result.logprobs, expected) < 1e-4
            kept = prompt + result.output_ids[:-1]  # the last sampled token was never fed
            n, kv = backend.prefix_cache.longest_prefix("", kept + [0])
            assert n == len(kept)  # kept whole, the shared prefix included
            for (k, v), (sk, sv) in zip(kv, solo_kv(recorder.model, kept)):
                assert max((k - sk).abs().max(), (v - sv).abs().max()) < 1e-4
    finally:
        engine_module.Engine._shared_prefix = shared_prefix
        await backend.close()


async def test_batched_prefill_caches_equal_solo_caches(texts):
    backend, recorder = recording_backend()
    try:
        system, users = texts
        encode = backend.model_dir.encode_text
        prompts = [encode(system + u) for u in users]
        samplings = [SamplingParams(temperature=1.0, max_tokens=6, seed=i) for i in range(len(prompts))]
        episodes = [f"kv-{i}" for i in range(len(prompts))]
        results = await generate_together(backend, recorder, prompts, samplings, episodes)
        for prompt, result, episode in zip(prompts, results, episodes):
            tokens = prompt + result.output_ids[:-1]
            entry = backend.prefix_cache._entries[episode]
            assert entry.tokens == tokens
            for (k, v), (k_ref, v_ref) in zip(entry.kv, solo_kv(recorder.model, tokens)):
                assert k.shape == k_ref.shape
                assert (k - k_ref).abs().max() < 1e-4 and (v - v_ref).abs().max() < 1e-4
    finally:
        await backend.close()


async def test_the_shared_prefix_is_read_once_then_reused_across_episodes():
    # prefill_chunk fits one whole prompt per forward pass, but not two; or many that reuse the system prompt.
    system = "You are a helpful coding agent. Use the tools, run the tests, and answer briefly. "
    backend, recorder = recording_backend(prefill_chunk=80, prefix_cache_entries=64)
    try:
        encode = backend.model_dir.encode_text
        prompts = [encode(system + f" Task {i}: Fix it.") for i in range(6)]
        assert all(40 < len(p) <= 80 for p in prompts) and len(encode(system)) > 30
        samplings = [SamplingParams(temperature=1.0, max_tokens=8, seed=60 + i) for i in range(len(prompts))]
        results = await generate_together(backend, recorder, prompts, samplings, [f"ep-{i}" for i in range(6)])
        reused = [int(r.timings["prompt_tokens_reused"]) for r in results]
        assert reused[0] == 0 and all(n >= len(encode(system)) - 2 for n in reused[1:])
        assert [ids.shape[0] for ids in recorder.prefills()] == [1, 5]  # the first prompt alone, then the rest

        # Exact: the same tokens and logprobs as reading each prompt from scratch.
        for prompt, sampling, result in zip(prompts, samplings, results):
            backend.prefix_cache.clear()
            fresh = await backend.generate(prompt, sampling, GenerationContext(episode_id="fresh"))
            assert fresh.timings["prompt_tokens_reused"] == 0
            assert fresh.output_ids == result.output_ids
            assert max_abs_diff(fresh.logprobs, result.logprobs) < 1e-4
            expected = reference_logprobs(recorder.model, prompt, result.output_ids, 1.0)
            assert max_abs_diff(result.logprobs, expected) < 1e-4
    finally:
        await backend.close()


async def test_another_episodes_prefix_is_reused_exactly(texts):
    backend = EmbeddedBackend(tiny_model_dir(), seed=0)
    try:
        system, users = texts
        encode = backend.model_dir.encode_text
        sampling = SamplingParams(temperature=1.0, max_tokens=16, seed=5)
        await backend.generate(encode(system + users[0]), sampling, GenerationContext(episode_id="first"))
        prompt = encode(system + users[1])
        shared = await backend.generate(prompt, sampling, GenerationContext(episode_id="second"))
        assert shared.timings["prompt_tokens_reused"] >= len(encode(system)) - 2
        backend.prefix_cache.clear()
        fresh = await backend.generate(prompt, sampling, GenerationContext(episode_id="second"))
        assert fresh.timings["prompt_tokens_reused"] == 0
        assert fresh.output_ids == shared.output_ids
        assert max_abs_diff(fresh.logprobs, shared.logprobs) < 1e-4
    finally:
        await backend.close()


async def test_a_long_prompt_is_read_in_chunks_while_short_ones_are_read_together():
    backend, recorder = recording_backend(prefill_chunk=32)
    try:
        long_prompt = [7 + (i % 500) for i in range(200)]  # 7 chunks
        shorts = [[11 + i, 12, 13 + i, 14, 15] for i in range(3)]
        prompts = [long_prompt, *shorts]
        samplings = [SamplingParams(temperature=1.0, max_tokens=10, seed=80 + i) for i in range(len(prompts))]
        results = await generate_together(backend, recorder, prompts, samplings, [f"mix-{i}" for i in range(4)])
        shapes = [tuple(ids.shape) for ids in recorder.prefills()]
        assert shapes[:2] == [(3, 5), (1, 32)]  # the short ones together, beside the long one's first chunk
        assert sum(width for rows, width in shapes if rows == 1) == 200
        for prompt, result in zip(prompts, results):
            expected = reference_logprobs(recorder.model, prompt, result.output_ids, 1.0)
            assert max_abs_diff(result.logprobs, expected) < 1e-4
        assert results[1].timings["prefill_s"] < results[0].timings["prefill_s"]
    finally:
        await backend.close()


async def test_the_former_schedule_reads_one_prompt_per_turn(texts):
    backend, recorder = recording_backend(batched_prefill=False)
    try:
        system, users = texts
        prompts = [backend.model_dir.encode_text(system + u) for u in users]
        samplings = [SamplingParams(temperature=1.0, max_tokens=6, seed=i) for i in range(len(prompts))]
        results = await generate_together(backend, recorder, prompts, samplings, ["a", "b", "c"])
        assert [ids.shape[0] for ids in recorder.prefills()] == [1, 1, 1]
        for prompt, result in zip(prompts, results):
            expected = reference_logprobs(recorder.model, prompt, result.output_ids, 1.0)
            assert max_abs_diff(result.logprobs, expected) < 1e-4
    finally:
        await backend.close()


def test_the_decode_batch_keeps_rows_exact_as_jobs_join_in_free_rows_and_leave():
    from openforge.inference import kv as kvlib
    from openforge.inference.engine import DecodeBatch, Job
    from openforge.models import ModelDir

    model = ModelDir(tiny_model_dir()).load_model(dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    sequences: dict[Job, list[int]] = {}

    def job_with_cache(n: int) -> tuple[Job, kvlib.KV]:
        tokens = torch.randint(10, 900, (n + 1,), generator=generator).tolist()
        job = Job(prompt=tokens[:n], sampling=None, stopper=None, generator=None, cache_key="", deliver=None)
        job.output = [tokens[n]]
        sequences[job] = tokens
        with torch.inference_mode():
            cache = model(input_ids=torch.tensor([tokens[:n]]), use_cache=True).past_key_values
        return job, kvlib.from_dynamic_cache(cache)

    def step_and_check(batch: DecodeBatch) -> None:
        with torch.inference_mode():
            logits = batch.step(model)
            for i, job in enumerate(batch.jobs):
                expected = model(input_ids=torch.tensor([sequences[job]])).logits[0, -1]
                assert (logits[i] - expected).abs().max() < 1e-4
                token = int(torch.argmax(logits[i]))
                job.output.append(token)
                sequences[job].append(token)

    batch = DecodeBatch()
    batch.add([job_with_cache(n) for n in (30, 12, 25, 7, 18)])
    step_and_check(batch)
    buffer = batch.cache.layers[0].key_buffer
    batch.remove([batch.jobs[0], batch.jobs[2]])  # holes filled from the last rows, no copy of the whole cache
    assert len(batch) == 3 and batch.cache.layers[0].key_buffer is buffer
    step_and_check(batch)
    batch.add([job_with_cache(n) for n in (5, 20)])  # shorter than the width: in free rows, in place
    assert len(batch) == 5 and batch.cache.layers[0].key_buffer is buffer
    for _ in range(3):
        step_and_check(batch)
    batch.add([job_with_cache(60)])  # longer than the width: the batch is rebuilt wider
    assert batch.width == 60
    step_and_check(batch)
    batch.remove([job for job in batch.jobs if len(sequences[job]) > 40])  # most of the width is padding now
    assert batch.width < 40
    step_and_check(batch)


def test_cascade_attention_keeps_rows_exact_as_the_shared_prefix_is_cut_and_rows_leave():
    """The decode batch keeps the prefix its rows share once (`cascade.py`); each step's logits are still those
    of reading each row's whole sequence alone, through a lone first row (its whole prompt shared), rows sharing
    it, a newcomer that differs earlier (the shared prefix is cut, its rest moved into every row) and rows
    leaving (each handed back whole, for the prefix cache)."""
    from openforge.inference import cascade
    from openforge.inference import kv as kvlib
    from openforge.inference.engine import DecodeBatch, Job
    from openforge.models import ModelDir

    model = ModelDir(tiny_model_dir()).load_model(dtype=torch.float32)
    assert cascade.enable(model)
    generator = torch.Generator().manual_seed(1)
    system = torch.randint(10, 900, (120,), generator=generator).tolist()
    sequences: dict[Job, list[int]] = {}

    def job_with_cache(prefix: list[int], n: int) -> tuple[Job, kvlib.KV]:
        tokens = prefix + torch.randint(10, 900, (n + 1,), generator=generator).tolist()
        job = Job(prompt=tokens[:-1], sampling=None, stopper=None, generator=None, cache_key="", deliver=None)
        job.output = [tokens[-1]]
        sequences[job] = tokens
        return job, solo_kv(model, tokens[:-1])

    def step_and_check(batch: DecodeBatch) -> None:
        with torch.inference_mode():
            logits = batch.step(model)
        for i, job in enumerate(batch.jobs):
            assert (logits[i] - solo_logits(model, sequences[job])).abs().max() < 1e-4
            token = int(torch.argmax(logits[i]))
            job.output.append(token)
            sequences[job].append(token)

    batch = DecodeBatch(cascade=True)
    batch.add([job_with_cache(system, 9)])  # alone: its whole prompt is the shared prefix
    assert len(batch.shared_tokens) == 129 and batch.lengths == [0]
    step_and_check(batch)
    batch.add([job_with_cache(system, n) for n in (4, 17)])  # the system prompt stays shared
    assert batch.shared_tokens == system and batch.lengths == [9 + 1, 4, 17]  # the cut moved 9 tokens
    for _ in range(2):
        step_and_check(batch)
    batch.add([job_with_cache(system[:80], 6)])  # differs after 80 tokens: the shared prefix is cut there
    assert batch.shared_tokens == system[:80] and len(batch.shared[0][0][0, 0]) == 80
    step_and_check(batch)
    leaving = batch.jobs[1]
    [(job, whole)] = batch.remove([leaving])
    expected = solo_kv(model, sequences[leaving][:-1])
    assert job is leaving and kvlib.kv_length(whole) == kvlib.kv_length(expected)
    assert max(float((k - ek).abs().max()) for (k, _), (ek, _) in zip(whole, expected)) < 1e-4
    step_and_check(batch)
    batch.add([job_with_cache(system[:30], 3)])  # shares less than MIN_SHARED: nothing stays shared
    assert batch.shared == [] and batch.shared_tokens == []
    step_and_check(batch)
    batch.remove(list(batch.jobs))
    assert batch.shared == [] and not batch.jobs


def test_cascade_attention_equals_sdpa_over_the_concatenated_cache():
    """The split attention (shared prefix + own tokens, merged softmax) against transformers' SDPA over the
    whole left-padded cache, grouped-query heads and padding included; a longer shared prefix than a row's own
    part, and the reverse; one new token per row (a decode step) and several (prompts read together: causal
    among them, from the mask or without one)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from openforge.inference import cascade

    class Module(torch.nn.Module):
        layer_idx, num_key_value_groups, is_causal = 0, 3, True

    generator = torch.Generator().manual_seed(0)
    rows, kv_heads, dim = 4, 2, 16
    for shared_len, own, length, padded in ((50, 7, 1, True), (3, 40, 1, True), (50, 9, 5, True), (30, 6, 6, False)):
        query = torch.randn(rows, kv_heads * 3, length, dim, generator=generator)
        shared = tuple(torch.randn(1, kv_heads, shared_len, dim, generator=generator) for _ in "kv")
        key = torch.randn(rows, kv_heads, own, dim, generator=generator)
        value = torch.randn(rows, kv_heads, own, dim, generator=generator)
        lengths = torch.tensor([own, own - 2, length, own - 3]) if padded else torch.full((rows,), own)
        columns = torch.arange(own)
        causal = columns.unsqueeze(0) <= (own - length + torch.arange(length)).unsqueeze(1)  # (S, own)
        mask = ((columns >= (own - lengths).unsqueeze(1)).unsqueeze(1) & causal)[:, None, :, :]
        got, _ = cascade.attention(
            Module(), query, key, value, mask if padded else None, **{cascade.SHARED_ARGUMENT: [shared]}
        )
        whole_mask = torch.cat((torch.ones(rows, 1, length, shared_len, dtype=torch.bool), mask), dim=-1)
        whole_key = torch.cat((shared[0].expand(rows, -1, -1, -1), key), dim=2)
        whole_value = torch.cat((shared[1].expand(rows, -1, -1, -1), value), dim=2)
        expected, _ = sdpa_attention_forward(Module(), query, whole_key, whole_value, whole_mask)
        assert got.shape == expected.shape == (rows, length, kv_heads * 3, dim)
        assert (got - expected).abs().max() < 1e-5, (shared_len, own, length, padded)


@pytest.mark.parametrize("compute", [torch.float32, torch.bfloat16])
def test_onednn_linears_follow_a_weight_changed_in_place(compute):
    """A packed weight is packed again after the weight or the bias changes in place (a weight swap's
    load_state_dict); in bfloat16 the output is float32 within bfloat16's rounding; with gradients enabled the
    layer runs as torch's own linear."""
    from openforge.inference.cpu_linear import PackedLinear, onednn_available, use_onednn_linears

    assert onednn_available()
    assert use_onednn_linears(torch.nn.Sequential(torch.nn.Linear(24, 40)), compute) == 0  # too small to gain
    layer = torch.nn.Linear(240, 500)
    x = torch.randn(5, 240)
    tolerance = 1e-5 if compute == torch.float32 else 5e-2
    assert use_onednn_linears(torch.nn.Sequential(layer), compute) == 1 and isinstance(layer.forward, PackedLinear)
    with torch.inference_mode():
        before = layer(x)
        assert before.dtype == torch.float32
        assert (before - torch.nn.functional.linear(x, layer.weight, layer.bias)).abs().max() < tolerance
        layer.load_state_dict({"weight": layer.weight * 2, "bias": layer.bias})
        after = layer(x)
        assert (after - torch.nn.functional.linear(x, layer.weight, layer.bias)).abs().max() < tolerance
    with torch.no_grad():
        layer.bias.add_(1)  # the bias alone
    with torch.inference_mode():
        moved = layer(x)
    assert (moved - torch.nn.functional.linear(x, layer.weight, layer.bias)).abs().max() < tolerance
    x.requires_grad_()
    layer(x).sum().backward()  # oneDNN's operator has no backward: torch's own runs
    assert x.grad is not None


async def test_the_backend_options_give_the_default_engines_tokens_and_logprobs(texts):
    """`cascade_attention` and `onednn_linears` on: requests behind a shared system prompt, one of them joining
    late with a prompt that differs earlier, decode to the default engine's greedy tokens, logprobs within
    rounding; the cascade path was taken. With `bf16_linears`, logprobs within bfloat16's rounding."""
    from openforge.inference import decode_batch
    from openforge.models import ModelDir

    system, users = texts
    model = ModelDir(tiny_model_dir())
    prefix = model.encode_text(system * 2)
    prompts = [prefix + model.encode_text(u) for u in users] + [prefix[:70] + model.encode_text(" other")]
    shared_steps = []
    step = decode_batch.DecodeBatch.step

    def counting_step(self, m):
        shared_steps.append(len(self.shared_tokens))
        return step(self, m)

    async def run(**options):
        backend = EmbeddedBackend(model, seed=0, prefix_cache_entries=0, **options)
        sampling = SamplingParams(temperature=0.0, max_tokens=12)
        try:
            tasks = [
                asyncio.create_task(backend.generate(p, sampling, GenerationContext(episode_id=f"e{i}")))
                for i, p in enumerate(prompts[:3])
            ]
            await asyncio.sleep(0.05)
            late = backend.generate(prompts[3], sampling, GenerationContext(episode_id="late"))
            return await asyncio.gather(*tasks, late)
        finally:
            await backend.close()

    default = await run()
    decode_batch.DecodeBatch.step = counting_step
    try:
        both = await run(cascade_attention=True, onednn_linears=True)
    finally:
        decode_batch.DecodeBatch.step = step
    assert max(shared_steps) >= 64
    for a, b in zip(default, both, strict=True):
        assert a.output_ids == b.output_ids
        assert max_abs_diff(a.logprobs, b.logprobs) < 1e-4
    # bfloat16 linears: the default's greedy tokens, logprobs within bfloat16's rounding (and not float32's: on)
    bf16 = await run(cascade_attention=True, bf16_linears=True)
    differences = [max_abs_diff(a.logprobs, b.logprobs) for a, b in zip(default, bf16, strict=True)]
    assert [b.output_ids for b in bf16] == [a.output_ids for a in default]
    assert 1e-4 < max(differences) < 0.05
