"""The embedded backend's engine: one thread that owns the model and runs every forward pass.

Why one thread: torch work must stay off the event loop, and a single owner needs no locks around the model,
the caches or a weight swap. Scheduling, per loop turn:

1. admit waiting jobs in arrival order, up to `max_batch` at a time;
2. prefill: each job starts from the longest cached prefix (`PrefixCache`: its own episode's last call, or any
   other entry, e.g. the system prompt every episode shares). The admitted jobs whose remaining prompt is short
   are read *together*, in one forward pass over a right-padded batch (at most `prefill_chunk` tokens,
   padding included), oldest first; and one chunk (`prefill_chunk` tokens) of the oldest long prompt is read;
3. run one decode step for *all* jobs past their prompt, batched in one forward pass over a left-padded cache
   (`decode_batch.DecodeBatch`). The jobs that finished reading their prompt join it together (one rebuild of the
   batch cache per turn).

Long prompts are thus read in slices between decode steps, so a 30k-token prompt does not stall the others.
A prompt's cache is kept (`PrefixCache`, under the job's key) as soon as the prompt is read, so the jobs admitted
with it but read in a later turn reuse what they share with it; prompt + output are kept when the call ends.
A weight swap lets the jobs already started run to the end (drain), applies, bumps the policy version and
empties the prefix cache; jobs not yet started — queued before the swap or after — wait and then run under the new
weights (asynchronous GRPO queues later steps' calls: they get the newest policy, not a drain of their own). Every
job runs entirely under one policy version, the one its result reports.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from openforge.core import FinishReason
from openforge.inference import cascade
from openforge.inference import kv as kvlib
from openforge.inference.base import BackendError, GenerationResult
from openforge.inference.decode_batch import DecodeBatch, Job, cache_argument
from openforge.inference.sampling import sample_token, sample_tokens

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)

# Called from the engine thread with a weight swap's new policy version or an exception.
DeliverVersion = Callable[[int | BaseException], None]


@dataclass(eq=False)
class WeightSwap:
    state_dict: dict[str, torch.Tensor]
    deliver: DeliverVersion


class _Stop:
    pass


class Engine:
    def __init__(
        self,
        model: PreTrainedModel,
        prefix_cache: kvlib.PrefixCache,
        max_batch: int = 16,
        prefill_chunk: int = 1024,
        batched_prefill: bool = True,
        cascade_attention: bool = False,
        policy_version: int = 0,
    ):
        """`batched_prefill=False`: the former schedule, for comparison (benchmarks/engine.py): one prompt
        chunk per turn, oldest job first, each job joining the decode batch on its own, caches kept only when
        a call ends. `cascade_attention`: the decode batch keeps the prefix its rows share once (the model runs
        `cascade.CASCADE` attention). `policy_version`: the version of the weights it starts with."""
        self.model = model
        self.prefix_cache = prefix_cache
        self.max_batch = max_batch
        self.prefill_chunk = prefill_chunk
        self.batched_prefill = batched_prefill
        self.policy_version = policy_version
        self._inbox: queue.SimpleQueue[Job | WeightSwap | _Stop | None] = queue.SimpleQueue()
        self._waiting: deque[Job] = deque()
        self._prefilling: deque[Job] = deque()
        self._batch = DecodeBatch(cascade=cascade_attention)
        self._swaps: list[WeightSwap] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="openforge-embedded-engine", daemon=True)
        self._thread.start()

    # ---- called from other threads -------------------------------------------------------------------------
    def submit(self, item: Job | WeightSwap) -> None:
        if self._closed:
            raise BackendError("the embedded backend is closed")
        self._inbox.put(item)

    def cancel(self, job: Job) -> None:
        job.cancelled = True
        self._inbox.put(None)  # wake the engine so it drops the job now, not at its next natural turn

    def close(self, timeout: float = 10.0) -> None:
        if not self._closed:
            self._closed = True
            self._inbox.put(_Stop())
            self._thread.join(timeout)

    @property
    def active_jobs(self) -> int:
        """Jobs admitted and not finished (for tests and metrics; read without locking)."""
        return len(self._prefilling) + len(self._batch)

    # ---- the engine thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        with torch.inference_mode():
            while True:
                if not self._take_inbox():
                    break
                self._drop_cancelled()
                self._admit()
                if self._swaps and not self._prefilling and not self._batch:
                    self._apply_swaps()
                if self._prefilling:
                    group, long_job = self._plan_prefill()
                    if group:
                        self._guarded(self._prefill_together, group, group)
                    if long_job is not None:
                        self._guarded(self._prefill_chunk, [long_job], long_job)
                if self._batch:
                    self._guarded(self._decode_step, list(self._batch.jobs))
        self._fail_all(BackendError("the embedded backend was closed"))

    def _idle(self) -> bool:
        return not (self._waiting or self._prefilling or self._batch or self._swaps)

    def _take_inbox(self) -> bool:
        """Move submitted items in; blocks while there is nothing to do. False when asked to stop."""
        items = []
        if self._idle():
            items.append(self._inbox.get())
        while True:
            try:
                items.append(self._inbox.get_nowait())
            except queue.Empty:
                break
        for item in items:
            if isinstance(item, _Stop):
                return False
            if isinstance(item, Job):
                self._waiting.append(item)
            elif isinstance(item, WeightSwap):
                self._swaps.append(item)
        return True

    def _drop_cancelled(self) -> None:
        self._waiting = deque(j for j in self._waiting if not j.cancelled)
        self._prefilling = deque(j for j in self._prefilling if not j.cancelled)
        gone = [j for j in self._batch.jobs if j.cancelled]
        self._batch.remove(gone)  # their caches are dropped: a cancelled call's output is not history

    def _admit(self) -> None:
        if self._swaps:  # the started jobs drain; the rest wait for the new weights
            return
        while self._waiting and len(self._prefilling) + len(self._batch) < self.max_batch:
            job = self._waiting.popleft()
            job.started = time.perf_counter()
            job.policy_version = self.policy_version
            self._prefilling.append(job)

    def _guarded(self, step: Callable[..., None], jobs: list[Job], *args: object) -> None:
        try:
            step(*args)
        except Exception as exc:  # a failed forward pass fails its jobs, not the engine
            log.exception("embedded backend step failed")
            error = BackendError(f"embedded backend failed: {type(exc).__name__}: {exc}")
            for job in jobs:
                if job in self._prefilling:
                    self._prefilling.remove(job)
                job.deliver(error)
            if any(job in self._batch.jobs for job in jobs):
                self._batch.clear()

    def _plan_prefill(self) -> tuple[list[Job], Job | None]:
        """The short prompts to read together this turn (oldest first, `prefill_chunk` tokens at most, padding
        included), and the oldest long prompt (read one chunk per turn)."""
        if not self.batched_prefill:
            return [], self._prefilling[0]
        group: list[Job] = []
        longest = 0  # the group's widest remaining prompt: each row is padded to it
        long_job = None
        open_group = True
        for job in self._prefilling:
            if job.cache is not None:  # a long prompt already being read in chunks
                long_job = long_job or job
                continue
            if not open_group:
                continue
            # Looked up again each turn until read: the prompts read in the meantime may share more.
            job.reused, job.prefix_kv = self.prefix_cache.longest_prefix(job.cache_key, job.prompt)
            job.prompt_done = job.reused
            remaining = len(job.prompt) - job.reused
            if remaining > self.prefill_chunk:
                long_job = long_job or job
            elif (len(group) + 1) * max(longest, remaining) <= self.prefill_chunk:
                group.append(job)
                longest = max(longest, remaining)
            else:
                open_group = False  # keep arrival order: the rest wait for the next turn
        return group, long_job

    def _prefill_together(self, jobs: list[Job]) -> None:
        """Read the rest of several short prompts in one forward pass.

        Row i holds its cached prefix left-padded to the widest prefix (as cache), then its remaining prompt
        tokens right-padded to the longest: [pad | prefix_i | rest_i | pad]. The attention mask hides the
        padding, the position ids are each row's own, and the logits are those of each row's last prompt token.
        Right padding (not left) keeps every query attending to at least one real token. With cascade attention,
        the cached prefix all rows share is read once beside the rows (`_shared_prefix`), not copied into each.
        """
        shared = self._shared_prefix(jobs)
        skip = kvlib.kv_length(shared)
        prefixes = [job.reused for job in jobs]
        owns = [n - skip for n in prefixes]  # the cached tokens each row holds itself
        rests = [job.prompt[job.reused :] for job in jobs]
        width, length = max(owns), max(len(rest) for rest in rests)
        if width:
            own_kvs = [kvlib.crop(job.prefix_kv, job.reused, start=skip) if job.prefix_kv else None for job in jobs]
            cache = kvlib.buffered_cache(own_kvs, width, spare_columns=length)
        else:
            cache = kvlib.to_dynamic_cache(None)
        input_ids = torch.zeros((len(jobs), length), dtype=torch.long)
        for i, rest in enumerate(rests):
            input_ids[i, : len(rest)] = torch.tensor(rest, dtype=torch.long)
        position_ids = torch.tensor(prefixes, dtype=torch.long).unsqueeze(1) + torch.arange(length).unsqueeze(0)
        kwargs: dict[str, Any] = {cache_argument(self.model): cache}
        if shared:
            kwargs[cascade.SHARED_ARGUMENT] = shared
        if any(n != width for n in owns) or any(len(rest) != length for rest in rests):
            columns = torch.arange(width + length).unsqueeze(0)
            starts = torch.tensor([width - n for n in owns]).unsqueeze(1)
            ends = torch.tensor([width + len(rest) for rest in rests]).unsqueeze(1)
            kwargs["attention_mask"] = ((columns >= starts) & (columns < ends)).long()
        last = sorted({len(rest) - 1 for rest in rests})  # the positions whose logits are needed
        keep: int | torch.Tensor = 1 if last == [length - 1] else torch.tensor(last, dtype=torch.long)
        out = self.model(input_ids=input_ids, position_ids=position_ids, use_cache=True, logits_to_keep=keep, **kwargs)
        batch_kv = kvlib.from_dynamic_cache(cache)
        done = set(jobs)
        self._prefilling = deque(j for j in self._prefilling if j not in done)
        arrivals = []
        for i, job in enumerate(jobs):
            job_kv = kvlib.row(batch_kv, i, width - owns[i], width + len(rests[i]), before=shared)
            logits = out.logits[i, -1 if isinstance(keep, int) else last.index(len(rests[i]) - 1)]
            job.prefix_kv = None
            finish = self._prompt_read(job, job_kv, logits)
            if finish is None:
                arrivals.append((job, job_kv))
            else:
                self._finish(job, finish, job_kv)
        self._batch.add(arrivals)

    def _shared_prefix(self, jobs: list[Job]) -> kvlib.KV:
        """With cascade attention, the cached prefix that every one of several prompts starts with (as the first
        one's cache holds it), when it is long enough to be worth reading apart; else none."""
        if not self._batch.cascade or len(jobs) < 2:
            return []
        first = jobs[0]
        n = min(job.reused for job in jobs)
        if n >= DecodeBatch.MIN_SHARED:
            n = min(kvlib.common_prefix(first.prompt[:n], job.prompt[:n]) for job in jobs[1:])
        if n < DecodeBatch.MIN_SHARED or first.prefix_kv is None:
            return []
        return kvlib.crop(first.prefix_kv, n)

    def _prefill_chunk(self, job: Job) -> None:
        """Read the next `prefill_chunk` tokens of one prompt."""
        if job.cache is None:
            job.reused, prefix_kv = self.prefix_cache.longest_prefix(job.cache_key, job.prompt)
            job.cache = kvlib.to_dynamic_cache(prefix_kv)
            job.prompt_done = job.reused
            job.prefix_kv = None
        start = job.prompt_done
        end = min(start + self.prefill_chunk, len(job.prompt))
        out = self.model(
            input_ids=torch.tensor([job.prompt[start:end]], dtype=torch.long),
            position_ids=torch.arange(start, end).unsqueeze(0),
            use_cache=True,
            **{cache_argument(self.model): job.cache},
            logits_to_keep=1,
        )
        job.prompt_done = end
        if end < len(job.prompt):
            return
        self._prefilling.remove(job)
        job_kv = kvlib.from_dynamic_cache(job.cache)
        job.cache = None
        finish = self._prompt_read(job, job_kv, out.logits[0, -1, :])
        if finish is None:
            self._batch.add([(job, job_kv)])
        else:
            self._finish(job, finish, job_kv)

    def _prompt_read(self, job: Job, job_kv: kvlib.KV, logits: torch.Tensor) -> FinishReason | None:
        """The prompt is in `job_kv`: keep it for the jobs that share it, and sample the first token."""
        job.first_token = time.perf_counter()
        if self.batched_prefill:
            self.prefix_cache.put(job.cache_key, job.prompt, job_kv)
        return self._append_token(job, *sample_token(logits.float(), job.sampling, job.generator))

    def _decode_step(self) -> None:
        logits = self._batch.step(self.model)
        jobs = self._batch.jobs
        sampled = sample_tokens(logits, [j.sampling for j in jobs], [j.generator for j in jobs])
        finished: dict[Job, FinishReason] = {}
        for job, (token, logprob) in zip(jobs, sampled, strict=True):
            finish = self._append_token(job, token, logprob)
            if finish is not None:
                finished[job] = finish
        for job, job_kv in self._batch.remove(list(finished)):
            self._finish(job, finished[job], job_kv)

    def _append_token(self, job: Job, token: int, logprob: float) -> FinishReason | None:
        job.output.append(token)
        job.logprobs.append(logprob)
        if job.on_token is not None:
            job.on_token(token, logprob)
        return job.stopper.check(job.output)

    def _finish(self, job: Job, finish: FinishReason, job_kv: kvlib.KV) -> None:
        # The cache holds the prompt and every output token but the last (sampled, never fed back).
        self.prefix_cache.put(job.cache_key, job.prompt + job.output[:-1], job_kv)
        now = time.perf_counter()
        job.deliver(
            GenerationResult(
                output_ids=job.output,
                logprobs=job.logprobs,
                finish_reason=finish,
                policy_version=job.policy_version,
                timings={
                    "queue_s": job.started - job.submitted,
                    "prefill_s": job.first_token - job.started,
                    "decode_s": now - job.first_token,
                    "prompt_tokens_reused": float(job.reused),
                },
            )
        )

    def _apply_swaps(self) -> None:
        for swap in self._swaps:
            try:
                self.model.load_state_dict(swap.state_dict, strict=False)
            except Exception as exc:  # noqa: BLE001 - any failure is the caller's answer, not the engine's end
                swap.deliver(BackendError(f"loading weights failed: {exc}"))
                continue
            self.policy_version += 1
            self.prefix_cache.clear()  # caches computed with the old weights are wrong for the new ones
            swap.deliver(self.policy_version)
        self._swaps = []

    def _fail_all(self, error: BaseException) -> None:
        for job in [*self._waiting, *self._prefilling, *self._batch.clear()]:
            job.deliver(error)
        for swap in self._swaps:
            swap.deliver(error)
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, (Job, WeightSwap)):
                item.deliver(error)
