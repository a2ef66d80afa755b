"""The jobs the embedded engine runs, and the batch of them it decodes together (`DecodeBatch`).

A job is one generation request: its prompt, sampling, stop rule and where its result goes; while it is read it
holds its prefill state, and once past its prompt it sits in a row of the decode batch, whose cache is kept in
buffers with room to grow (`kv.BufferedLayer`). With cascade attention (`cascade.py`) the prefix all rows share is
kept once, beside the rows' buffers, and each row holds only the tokens after it.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from transformers import DynamicCache

from openforge.core import SamplingParams
from openforge.inference import cascade
from openforge.inference import kv as kvlib
from openforge.inference.base import GenerationResult
from openforge.inference.stopping import StopChecker

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# Called from the engine thread with a job's result or an exception.
DeliverResult = Callable[[GenerationResult | BaseException], None]


@dataclass(eq=False)
class Job:
    prompt: list[int]
    sampling: SamplingParams
    stopper: StopChecker
    generator: torch.Generator
    cache_key: str  # where this job's final cache is kept for the next call ("" = not kept)
    deliver: DeliverResult
    on_token: Callable[[int, float], None] | None = None  # streaming: called per sampled token (engine thread)
    cancelled: bool = False
    output: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    policy_version: int = 0
    # prefill progress
    cache: DynamicCache | None = None  # while reading a long prompt in chunks
    prefix_kv: kvlib.KV | None = None  # the cached prefix found for a short prompt, until it is read
    prompt_done: int = 0
    reused: int = 0
    # timings (perf_counter seconds)
    submitted: float = field(default_factory=time.perf_counter)
    started: float = 0.0
    first_token: float = 0.0


_CACHE_ARGUMENTS: dict[type, str] = {}  # by model class, found once


def cache_argument(model: torch.nn.Module) -> str:
    """The forward() keyword for the KV cache: `cache` in transformers 5, `past_key_values` before."""
    name = _CACHE_ARGUMENTS.get(type(model))
    if name is None:
        # a peft model's forward takes **kwargs and hands them on: ask the model it wraps
        inner = getattr(model, "get_base_model", lambda: model)()
        name = "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"
        _CACHE_ARGUMENTS[type(model)] = name
    return name


class DecodeBatch:
    """The jobs past their prompt, decoded together. Row i's cache is left-padded to the batch width.

    The cache lives in buffers with spare rows and columns (`kv.BufferedLayer`): a decode step writes its column
    in place, jobs join in free rows when their caches fit the width, and a job leaving hands its row to one of
    the last rows. The whole cache is copied only when it must be widened for a longer newcomer, when it runs
    out of rows, or when most of its width has become padding.
    """

    SPARE_COLUMNS = 64  # room for this many decode steps before the buffers are widened
    MIN_SHARED = 64  # a shared prefix shorter than this is left in the rows (two attention parts cost more)

    def __init__(self, cascade: bool = False) -> None:
        """`cascade`: keep the prefix every row shares once (the model runs `cascade.CASCADE` attention)."""
        self.cascade = cascade
        self.jobs: list[Job] = []
        self.lengths: list[int] = []  # real (unpadded) tokens in each row's own cache (after the shared prefix)
        self.layers: list[kvlib.BufferedLayer] = []  # kept across steps
        self.cache: DynamicCache | None = None  # made of `layers` (None while there are none)
        self.shared: kvlib.KV = []  # the prefix every row shares, one row per layer (empty: none)
        self.shared_tokens: list[int] = []

    def __len__(self) -> int:
        return len(self.jobs)

    @property
    def width(self) -> int:
        return self.layers[0].length if self.layers else 0

    def _use(self, layers: list[kvlib.BufferedLayer]) -> None:
        self.layers = layers
        self.cache = kvlib.cache_of(layers) if layers else None

    def add(self, arrivals: list[tuple[Job, kvlib.KV]]) -> None:
        """Add jobs with their own (unpadded, one-row) caches of their prompts."""
        if not arrivals:
            return
        if self.cascade:
            arrivals = self._split_shared(arrivals)
        new_lengths = [kvlib.kv_length(job_kv) for _, job_kv in arrivals]
        rows, width = len(self.jobs), self.width
        layers = self.layers
        if layers and max(new_lengths) <= width and rows + len(arrivals) <= layers[0].key_buffer.shape[0]:
            for i, layer in enumerate(layers):
                for r, ((_, job_kv), n) in enumerate(zip(arrivals, new_lengths), start=rows):
                    for buffer, t in ((layer.key_buffer, job_kv[i][0]), (layer.value_buffer, job_kv[i][1])):
                        buffer[r, :, : width - n] = 0
                        buffer[r, :, width - n : width] = t[0]
                layer.view(rows + len(arrivals), width)
        else:
            current = [[(layer.keys, layer.values) for layer in layers]] if layers else []
            self._use(
                kvlib.buffered_layers(
                    current + [job_kv for _, job_kv in arrivals],
                    max(width, *new_lengths),
                    spare_rows=(rows + len(arrivals)) // 4,
                    spare_columns=self.SPARE_COLUMNS,
                )
            )
        self.jobs.extend(job for job, _ in arrivals)
        self.lengths.extend(new_lengths)

    def remove(self, leaving: list[Job]) -> list[tuple[Job, kvlib.KV]]:
        """Take jobs out; returns each with its own unpadded cache (for the prefix cache)."""
        if not leaving:
            return []
        layers, width = self.layers, self.width
        gone = [i for i, job in enumerate(self.jobs) if job in leaving]
        out = [(self.jobs[i], self._whole_row(i)) for i in gone]
        rows = len(self.jobs) - len(gone)
        if rows == 0:
            self.clear()
            return out
        # The last rows that stay move into the holes that the leaving jobs leave among the first `rows`.
        holes = [i for i in gone if i < rows]
        leaving_rows = set(gone)
        movers = [i for i in range(rows, len(self.jobs)) if i not in leaving_rows]
        if holes:
            dst, src = torch.tensor(holes), torch.tensor(movers)
            for layer in layers:
                for buffer in (layer.key_buffer, layer.value_buffer):
                    buffer[dst, :, :width] = buffer[src, :, :width]
        for d, m in zip(holes, movers):
            self.jobs[d], self.lengths[d] = self.jobs[m], self.lengths[m]
        del self.jobs[rows:], self.lengths[rows:]
        for layer in layers:
            layer.view(rows, width)
        unused = width - max(self.lengths)  # padding columns no remaining row needs
        if unused > width // 2:
            kept = [(layer.keys[:, :, unused:], layer.values[:, :, unused:]) for layer in layers]
            self._use(kvlib.buffered_layers([kept], width - unused, spare_columns=self.SPARE_COLUMNS))
        return out

    def clear(self) -> list[Job]:
        jobs, self.jobs, self.lengths = self.jobs, [], []
        self._use([])
        self.shared, self.shared_tokens = [], []
        return jobs

    def _whole_row(self, i: int) -> kvlib.KV:
        """Row i's cache, shared prefix included, unpadded (a copy: the batch's memory can be freed)."""
        own = [(layer.keys, layer.values) for layer in self.layers]
        return kvlib.row(own, i, self.width - self.lengths[i], before=self.shared)

    def _split_shared(self, arrivals: list[tuple[Job, kvlib.KV]]) -> list[tuple[Job, kvlib.KV]]:
        """The arrivals with only what follows the shared prefix, which becomes the prefix the batch and all of
        them have in common (a fresh batch: the arrivals' common prefix; else the current one, cut where an
        arrival differs, its rest moved into every row)."""
        prompts = [job.prompt[: kvlib.kv_length(job_kv)] for job, job_kv in arrivals]
        if not self.jobs:
            first = arrivals[0][1]
            n = min(kvlib.common_prefix(prompts[0], p) for p in prompts)
            if n >= self.MIN_SHARED:
                self.shared = [(k[..., :n, :].contiguous(), v[..., :n, :].contiguous()) for k, v in first]
                self.shared_tokens = prompts[0][:n]
        elif self.shared:
            n = min(kvlib.common_prefix(self.shared_tokens, p) for p in prompts)
            if n < len(self.shared_tokens):
                self._cut_shared(n if n >= self.MIN_SHARED else 0)
        p = len(self.shared_tokens)
        return [(job, [(k[..., p:, :], v[..., p:, :]) for k, v in job_kv]) for job, job_kv in arrivals]

    def _cut_shared(self, n: int) -> None:
        """Keep the first n tokens shared; the rest of the shared prefix moves to the front of every row."""
        rows = [self._whole_row(i) for i in range(len(self.jobs))]
        self.shared_tokens = self.shared_tokens[:n]
        self.shared = [(k[..., :n, :].contiguous(), v[..., :n, :].contiguous()) for k, v in self.shared] if n else []
        rows = [[(k[..., n:, :], v[..., n:, :]) for k, v in kv] for kv in rows]
        self.lengths = [kvlib.kv_length(kv) for kv in rows]
        self._use(
            kvlib.buffered_layers(rows, max(self.lengths), spare_rows=len(rows) // 4, spare_columns=self.SPARE_COLUMNS)
        )

    def step(self, model: PreTrainedModel) -> torch.Tensor:
        """Feed each row's newest token; returns next-token logits, shape (rows, vocab), float32."""
        width = self.width
        lengths = torch.tensor(self.lengths, dtype=torch.long)
        input_ids = torch.tensor([[job.output[-1]] for job in self.jobs], dtype=torch.long)
        # the new token's position in its own (unpadded) sequence, shared prefix included
        position_ids = (lengths + len(self.shared_tokens)).unsqueeze(1)
        kwargs: dict[str, Any] = {}
        if any(n != width for n in self.lengths):
            columns = torch.arange(width + 1).unsqueeze(0)
            kwargs["attention_mask"] = (columns >= (width - lengths).unsqueeze(1)).long()
        kwargs[cache_argument(model)] = self.cache
        if self.shared:
            kwargs[cascade.SHARED_ARGUMENT] = self.shared
        out = model(input_ids=input_ids, position_ids=position_ids, use_cache=True, **kwargs)
        self.lengths = [n + 1 for n in self.lengths]
        return out.logits[:, -1, :].float()
