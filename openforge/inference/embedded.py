"""`embedded`: the model in this process, with transformers on CPU.

For tests, the tiny model and small real models on a laptop. The engine thread (`engine.py`) owns the model;
`generate` only queues a job and awaits its result, so the event loop never runs torch code.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import torch

from openforge.core import SamplingParams
from openforge.inference import cascade
from openforge.inference import kv as kvlib
from openforge.inference.base import (
    Backend,
    BackendError,
    GenerationContext,
    GenerationResult,
    InvalidRequestError,
    SampledToken,
    check_token_ids,
    clamp_max_tokens,
)
from openforge.inference.cpu_linear import use_onednn_linears
from openforge.inference.decode_batch import DeliverResult, Job
from openforge.inference.engine import Engine, WeightSwap
from openforge.inference.sampling import seeded_generator
from openforge.inference.stopping import StopChecker

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from openforge.models import ModelDir

T = TypeVar("T")


def default_num_threads() -> int:
    """CPUs this process may really use: its affinity mask, capped by a cgroup CPU quota (containers)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cpus = min(cpus, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


class EmbeddedBackend(Backend):
    """Transformers on CPU, one engine thread, batched decoding, per-episode prefix reuse.

    - `seed`: seeds the per-request seeds of requests that carry none (a request's own `sampling.seed`
      always wins); None draws them from the OS.
    - `num_threads`: torch intra-op threads (process-wide); default: the CPUs this process may use.
    - `max_batch`: jobs decoded together; later ones wait in arrival order.
    - `prefill_chunk`: prompt tokens read per engine turn, between decode steps of the other jobs.
    - `prefix_cache_entries` / `prefix_cache_bytes`: the last cache of that many recent episodes is kept.
    - `batched_prefill`: False restores the former one-prompt-per-turn schedule (for benchmarks/engine.py).
    - `cascade_attention`: decode steps read the prefix all rows share once (`cascade.py`; models with plain
      attention only, others ignore it). Off by default until measured on the recipes' workloads.
    - `onednn_linears`: linear layers run through oneDNN with packed weights (`cpu_linear.py`). Off by default,
      as above.
    - `bf16_linears`: the same in bfloat16 (half the weight memory read per step; logits and recorded logprobs
      differ from float32 by bfloat16's rounding). Off by default.
    - `policy_version`: the version of the weights it starts with (a resumed training run's last one), so
      recorded calls keep counting where the run left off.
    """

    def __init__(
        self,
        model_dir: str | Path | ModelDir,
        *,
        seed: int | None = None,
        num_threads: int | None = None,
        max_batch: int = 16,
        prefill_chunk: int = 1024,
        prefix_cache_entries: int = 16,
        prefix_cache_bytes: int = 1 << 30,
        batched_prefill: bool = True,
        cascade_attention: bool = False,
        onednn_linears: bool = False,
        bf16_linears: bool = False,
        policy_version: int = 0,
    ):
        # models may import inference later; keep the edge one-way
        from openforge.models import ModelDir

        if policy_version < 0:
            raise ValueError(f"policy_version must be >= 0, got {policy_version}")
        self.model_dir = model_dir if isinstance(model_dir, ModelDir) else ModelDir(model_dir)
        torch.set_num_threads(num_threads or default_num_threads())
        model = self.model_dir.load_model(dtype=torch.float32)
        kvlib.check_attention_layers(model.config)
        if onednn_linears or bf16_linears:
            use_onednn_linears(model, torch.bfloat16 if bf16_linears else torch.float32)
        self.vocab_size = int(model.config.vocab_size)  # embedding rows: may exceed the tokenizer's vocabulary
        self.eos_token_ids = list(self.model_dir.eos_token_ids)
        self._seeds = random.Random(seed) if seed is not None else random.SystemRandom()
        self.prefix_cache = kvlib.PrefixCache(prefix_cache_entries, prefix_cache_bytes)
        self._request_numbers = itertools.count()
        self._engine = Engine(
            model,
            self.prefix_cache,
            max_batch=max_batch,
            prefill_chunk=prefill_chunk,
            batched_prefill=batched_prefill,
            cascade_attention=cascade_attention and cascade.enable(model),
            policy_version=policy_version,
        )

    @property
    def max_context(self) -> int:
        return self.model_dir.max_context

    @property
    def policy_version(self) -> int:  # type: ignore[override]
        return self._engine.policy_version

    @property
    def model(self) -> PreTrainedModel:
        """The live model (read-only use: e.g. a test's reference forward pass)."""
        return self._engine.model

    @property
    def active_jobs(self) -> int:
        return self._engine.active_jobs

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> GenerationResult:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[GenerationResult] = loop.create_future()
        job = self._job(prompt_ids, sampling, ctx, _deliverer(loop, future))
        self._engine.submit(job)
        try:
            return await future
        except asyncio.CancelledError:
            self._engine.cancel(job)
            raise

    streams_tokens = True
    swaps_in_flight = True  # the engine drains only the jobs it has started (`engine.py`)

    async def stream(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> AsyncIterator[SampledToken | GenerationResult]:
        """Like `generate`, but yields each token as the engine samples it (a per-job callback on the engine
        thread), then the GenerationResult. Leaving the iteration early (or cancelling it) stops the job."""
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[SampledToken | GenerationResult | BaseException] = asyncio.Queue()

        def push(item: SampledToken | GenerationResult | BaseException) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, item)
            except RuntimeError:  # loop closed
                pass

        job = self._job(prompt_ids, sampling, ctx, push, on_token=lambda t, lp: push(SampledToken(t, lp)))
        self._engine.submit(job)
        finished = False
        try:
            while True:
                item = await events.get()
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                if isinstance(item, GenerationResult):
                    finished = True
                    yield item
                    return
                yield item
        finally:
            if not finished:
                self._engine.cancel(job)

    def _job(
        self,
        prompt_ids: list[int],
        sampling: SamplingParams,
        ctx: GenerationContext,
        deliver: DeliverResult,
        on_token: Callable[[int, float], None] | None = None,
    ) -> Job:
        self.check_request(prompt_ids, sampling)
        check_token_ids(prompt_ids, self.vocab_size)
        check_token_ids(sampling.stop_token_ids, self.vocab_size, what="stop_token_ids")
        stopper = StopChecker(
            stop_token_ids=[*self.eos_token_ids, *sampling.stop_token_ids],
            stop_strings=sampling.stop,
            max_new_tokens=clamp_max_tokens(len(prompt_ids), sampling, self.max_context),
            decode=self.model_dir.decode,
        )
        seed = sampling.seed if sampling.seed is not None else self._seeds.getrandbits(63)
        if ctx.episode_id:
            # Side calls (titles, summaries) get their own slot so they do not evict the episode's main line.
            cache_key = f"{ctx.episode_id}:side" if ctx.side_call else ctx.episode_id
        else:
            # No episode: still keep the cache (LRU); the longest-prefix lookup finds it from any later call.
            cache_key = f"request:{next(self._request_numbers)}"
        return Job(
            prompt=list(prompt_ids),
            sampling=sampling,
            stopper=stopper,
            generator=seeded_generator(seed),
            cache_key=cache_key,
            deliver=deliver,
            on_token=on_token,
        )

    async def load_weights(self, path: str) -> int:
        """Swap in the weights of the model directory at `path` (safetensors); returns the new policy version.

        Waits for running generations to finish (they keep the version they started under); requests that
        arrive meanwhile run under the new weights. Cached prefixes are dropped.
        """
        state_dict = await asyncio.to_thread(self._read_weights, Path(path))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self._engine.submit(WeightSwap(state_dict, _deliverer(loop, future)))
        return await future

    def _read_weights(self, path: Path) -> dict[str, torch.Tensor]:
        from safetensors.torch import load_file

        files = sorted(path.glob("*.safetensors")) if path.is_dir() else []
        if not files:
            raise InvalidRequestError(f"{path} holds no *.safetensors weights to load")
        state: dict[str, torch.Tensor] = {}
        for f in files:
            state.update(load_file(str(f)))
        expected = self.model.state_dict()
        unexpected = sorted(set(state) - set(expected))
        missing = sorted(set(expected) - set(state) - self._tied_keys())
        wrong_shape = sorted(k for k in state.keys() & expected.keys() if state[k].shape != expected[k].shape)
        if unexpected or missing or wrong_shape:
            raise InvalidRequestError(
                f"weights in {path} do not fit the served model: "
                f"missing {missing[:5]}, unexpected {unexpected[:5]}, wrong shape {wrong_shape[:5]}"
            )
        return state

    def _tied_keys(self) -> set[str]:
        """Parameters that share storage with another (tied embeddings): files may omit them."""
        seen: dict[int, str] = {}
        tied = set()
        for name, tensor in self.model.state_dict(keep_vars=True).items():
            ptr = tensor.data_ptr()
            if ptr in seen:
                tied.add(name)
            seen.setdefault(ptr, name)
        return tied

    async def close(self) -> None:
        await asyncio.to_thread(self._engine.close)


def _deliverer(loop: asyncio.AbstractEventLoop, future: asyncio.Future[T]) -> Callable[[T | BaseException], None]:
    """A callback for the engine thread that completes `future` on its own event loop."""

    def settle(outcome: T | BaseException) -> None:
        if future.done():  # cancelled meanwhile
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def deliver(outcome: T | BaseException) -> None:
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    return deliver


__all__ = ["BackendError", "EmbeddedBackend", "default_num_threads"]
