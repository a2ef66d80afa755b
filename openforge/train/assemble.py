"""Assembly: an episode's recorded calls become training samples (docs/design.md, invariant 6: a pure function).

Two modes, so that they can be compared on the same records:

- `merged` (default): the calls of one continuity segment, as the proxy recorded it, form one sequence: the
  last call's prompt + output. The proxy spliced every call of a segment onto the exact ids of the one before
  (prompt of call k+1 = prompt of call k + its output + new tokens), so that sequence holds every output of
  the segment at the positions where it was sampled. Each segment is its own sample.
- `per-call`: one sample per call (its prompt + its output), what the OpenForgeRL paper trains on. Prompts
  repeat across samples, so the same context is paid for once per call.

In both modes every sampled token (a call's `output_ids`) has loss mask 1 in exactly one sample, and
everything else (system prompt, user and tool messages, the template's turn markup) has 0.

Per sample:
- `logprobs`: aligned with `token_ids`: the call's `output_logprobs` at its output positions, 0.0 elsewhere
  (also 0.0 for a call recorded without logprobs; `metadata["logprobs_missing"]` names such calls).
- `policy_versions`: **per token**, aligned with `token_ids`: the policy version of the call that sampled the
  token, -1 where the mask is 0. A segment may span a weight update, so one version per sample would lie.
- `prompt_length`: the index of the first trained token.
- `reward`: the episode's reward; `group_id`: `f"{step}|{task}|{harness}"` (the GRPO group), step from the
  argument, else `episode.metadata["step"]`, else 0.
- `metadata`: `mode`, `task`, `harness`, `step`, `outcome`, `calls` (the indices of the calls whose outputs
  it trains, in order), `opened_by` (why the sequence started: None for an episode's first call, else the
  call's break reason, or `unexpected_break`), `side_call`.

What is left out:
- side calls (titles, summaries the harness asks for on the side), unless `include_side_calls`; included,
  each is a sample of its own (they continue nothing);
- calls with `call_error` (the backend failed: no usable output), and calls with no output at all;
- late calls (`is_late`): refused after the episode's key ended (`metadata["late"]`), or answered after the
  episode ended — the key ends when the harness exits, so no harness received that reply (a process the agent
  left behind made the call); counted in `calls_late`;
- whole episodes that ended in an infrastructure failure (sandbox_error, proxy_error, harness_crash,
  timeout, verifier_error) or have no reward: they say nothing about the policy (docs/design.md, invariant 5);
  in `assemble` and `assemble_run`, whole episodes that are not final (`openforge.store.final`: retried
  attempts, unfinished episodes).

The prefix property is checked as the calls are merged. A call that does not extend the previous call of its
segment should not exist; if one does, it starts a new sample (its prompt then holds the earlier outputs with
mask 0, so nothing is trained twice) and is counted as `unexpected_break`, rather than mis-aligning masks.

    samples = assemble_episode(episode, calls)                          # pure
    samples, metrics = assemble(pairs_of_episode_and_calls)              # pure, with metrics
    samples, metrics = assemble_run(store_or_run_dir)                    # reads a TrajectoryStore
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from pydantic import BaseModel, Field

from openforge.core import CallRecord, Episode, Sample
from openforge.store.final import is_final

if TYPE_CHECKING:
    from openforge.store import TrajectoryStore

Mode = Literal["merged", "per-call"]
MODES: tuple[Mode, ...] = ("merged", "per-call")
UNEXPECTED_BREAK = "unexpected_break"


# ---- metrics ----------------------------------------------------------------------------------------------


def _per_mode() -> dict[str, int]:
    return {m: 0 for m in MODES}


class AssemblyMetrics(BaseModel):
    """What assembly did with a run's calls. JSON: `metrics.model_dump(mode="json")` / `model_dump_json()`.

    Call counts cover the episodes used. Of their calls that assembly looks at (non-side, no error):
    `calls_merged` continued their segment's sequence, `calls_opening` started an episode's first sequence
    (nothing earlier to continue), and `calls_broken[reason]` started a new sequence after a continuity break
    (the proxy's `break_reason`, or `unexpected_break`). Token and sample counts are given for both modes
    whatever `mode` was asked for, so that a run can report what merging saves.
    """

    mode: str = "merged"
    episodes_used: int = 0
    episodes_dropped: dict[str, int] = Field(default_factory=dict)  # by outcome, "no_reward" or "not_final"
    calls_total: int = 0  # every call of the used episodes, side calls and errored calls included
    calls_in_dropped_episodes: int = 0
    calls_merged: int = 0
    calls_opening: int = 0
    calls_broken: dict[str, int] = Field(default_factory=dict)
    side_calls: int = 0
    side_calls_excluded: int = 0
    calls_errored: int = 0  # call_error set: excluded
    calls_late: int = 0  # made or answered after the harness exited: excluded
    calls_empty: int = 0  # no output ids (nothing to train): contribute nothing
    calls_without_logprobs: int = 0
    training_tokens: dict[str, int] = Field(default_factory=_per_mode)  # mask-1 tokens
    sequence_tokens: dict[str, int] = Field(default_factory=_per_mode)  # all tokens of all samples
    samples_by_mode: dict[str, int] = Field(default_factory=_per_mode)
    samples: int = 0  # in `mode`: len() of the samples returned

    @property
    def merge_rate(self) -> float:
        """Share of the examined calls after an episode's first that continued their sequence."""
        continuing = self.calls_merged + sum(self.calls_broken.values())
        return self.calls_merged / continuing if continuing else 1.0

    @property
    def token_saving(self) -> float:
        """per-call sequence tokens / merged sequence tokens (how many times fewer tokens merging costs)."""
        merged = self.sequence_tokens["merged"]
        return self.sequence_tokens["per-call"] / merged if merged else 1.0

    def summary(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "merge_rate": self.merge_rate, "token_saving": self.token_saving}


def _bump(counter: dict[str, int], key: str, by: int = 1) -> None:
    counter[key] = counter.get(key, 0) + by


# ---- which episodes and calls count ------------------------------------------------------------------------


def drop_reason(episode: Episode) -> str | None:
    """Why an episode gives no samples: its infrastructure failure, or `no_reward`; None if it is used."""
    if episode.outcome is not None and episode.outcome.is_infrastructure_failure:
        return episode.outcome.value
    if episode.reward is None:
        return "no_reward"
    return None


def group_id(episode: Episode, step: int | None = None) -> str:
    """The GRPO group: samples of the same task, harness and training step are compared with each other."""
    if step is None:
        step = episode.metadata.get("step", 0)
    return f"{step}|{episode.task}|{episode.harness}"


# ---- continuity: which calls form one sequence -----------------------------------------------------------


def extends(previous: CallRecord, call: CallRecord) -> bool:
    """Whether `call`'s prompt starts with `previous`'s prompt + output, token for token."""
    n = len(previous.prompt_ids)
    m = n + len(previous.output_ids)
    prompt = call.prompt_ids
    return len(prompt) >= m and prompt[n:m] == previous.output_ids and prompt[:n] == previous.prompt_ids


@dataclass
class Sequence:
    """Calls that extend each other, in order: one merged sample (the last call's prompt + output)."""

    calls: list[CallRecord]
    opened_by: str | None  # None: the episode's first sequence; else a break reason or UNEXPECTED_BREAK

    @property
    def length(self) -> int:
        last = self.calls[-1]
        return len(last.prompt_ids) + len(last.output_ids)


@dataclass
class _EpisodeCalls:
    """The calls of one episode sorted out: sequences to train on, and counts of what was left out."""

    sequences: list[Sequence] = field(default_factory=list)
    merged: int = 0
    opening: int = 0
    broken: dict[str, int] = field(default_factory=dict)
    side: int = 0
    side_excluded: int = 0
    errored: int = 0
    late: int = 0
    empty: int = 0
    without_logprobs: int = 0


def is_late(episode: Episode, call: CallRecord) -> bool:
    """Whether `call` came after the episode's harness exited (when its key ended): refused as late, or
    answered after the end — no harness received that reply. Never trained on."""
    if call.metadata.get("late"):
        return True
    return episode.ended_at is not None and call.finished_at is not None and call.finished_at > episode.ended_at


def _sort_calls(calls: list[CallRecord], include_side_calls: bool, episode: Episode) -> _EpisodeCalls:
    """Group the usable calls into sequences: one per continuity segment, split where (unexpectedly) a call
    does not extend the previous one of its segment."""
    out = _EpisodeCalls()
    open_by_segment: dict[int, Sequence] = {}
    for call in sorted(calls, key=lambda c: c.index):
        if is_late(episode, call):
            out.late += 1
            continue
        if call.side_call:
            out.side += 1
            if not include_side_calls:
                out.side_excluded += 1
                continue
        if call.call_error is not None:
            out.errored += 1
            continue
        if not call.output_ids:
            out.empty += 1
        elif not call.output_logprobs:
            out.without_logprobs += 1
        if call.side_call:  # continues nothing, and nothing continues it
            out.sequences.append(Sequence([call], "side_call"))
            continue
        current = open_by_segment.get(call.segment)
        if current is not None and extends(current.calls[-1], call):
            current.calls.append(call)
            out.merged += 1
            continue
        reason: str | None
        if current is not None:
            reason = UNEXPECTED_BREAK  # same segment, yet not an extension: never mis-align masks
        else:
            reason = call.break_reason
        if reason is None:
            out.opening += 1
        else:
            _bump(out.broken, reason)
        sequence = Sequence([call], reason)
        open_by_segment[call.segment] = sequence
        out.sequences.append(sequence)
    return out


# ---- samples ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    """What every sample of one episode shares."""

    episode: Episode
    reward: float  # the episode's (one without a reward gives no sample: `drop_reason`)
    group_id: str
    step: int
    mode: Mode

    def metadata(self, sequence_calls: list[CallRecord], opened_by: str | None) -> dict[str, Any]:
        missing = [c.index for c in sequence_calls if c.output_ids and not c.output_logprobs]
        meta = {
            "mode": self.mode,
            "task": self.episode.task,
            "harness": self.episode.harness,
            "step": self.step,
            "outcome": self.episode.outcome.value if self.episode.outcome else None,
            "calls": [c.index for c in sequence_calls],
            "opened_by": opened_by,
            "side_call": sequence_calls[0].side_call,
        }
        if missing:
            meta["logprobs_missing"] = missing
        return meta


def _sample(ctx: _Context, token_ids: list[int], trained: list[CallRecord], opened_by: str | None) -> Sample | None:
    """A sample over `token_ids` whose mask is 1 exactly on the outputs of `trained` (each call's output
    sits right after its prompt, which is a prefix of `token_ids`). None if nothing in it is trained."""
    n = len(token_ids)
    loss_mask = [0] * n
    logprobs = [0.0] * n
    versions = [-1] * n
    first_trained = None
    for call in trained:
        start, k = len(call.prompt_ids), len(call.output_ids)
        if k == 0:
            continue
        if first_trained is None:
            first_trained = start
        loss_mask[start : start + k] = [1] * k
        logprobs[start : start + k] = call.output_logprobs or [0.0] * k
        versions[start : start + k] = [call.policy_version] * k
    if first_trained is None:
        return None
    # model_construct: the lists are built aligned right here; validating 100k-element lists per sample
    # would cost more than assembling them
    return Sample.model_construct(
        token_ids=token_ids,
        loss_mask=loss_mask,
        logprobs=logprobs,
        reward=float(ctx.reward),
        group_id=ctx.group_id,
        episode_id=ctx.episode.id,
        segment=trained[0].segment,
        prompt_length=first_trained,
        policy_versions=versions,
        metadata=ctx.metadata(trained, opened_by),
    )


def _merged_samples(ctx: _Context, sequences: list[Sequence]) -> list[Sample]:
    samples = []
    for seq in sequences:
        last = seq.calls[-1]
        sample = _sample(ctx, last.prompt_ids + last.output_ids, seq.calls, seq.opened_by)
        if sample is not None:
            samples.append(sample)
    return samples


def _per_call_samples(ctx: _Context, sequences: list[Sequence]) -> list[Sample]:
    calls = sorted((c for seq in sequences for c in seq.calls), key=lambda c: c.index)
    samples = []
    for call in calls:
        opened_by = call.break_reason if not call.side_call else "side_call"
        sample = _sample(ctx, call.prompt_ids + call.output_ids, [call], opened_by)
        if sample is not None:
            samples.append(sample)
    return samples


def is_mode(value: str) -> TypeGuard[Mode]:
    return value in MODES


def checked_mode(value: str) -> Mode:
    """`value` as an assembly mode; ValueError naming the modes when it is not one."""
    if not is_mode(value):
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {value!r}")
    return value


def _context(episode: Episode, mode: Mode, step: int | None) -> _Context:
    assert episode.reward is not None  # callers pass only episodes `drop_reason` keeps, which have a reward
    step = episode.metadata.get("step", 0) if step is None else step
    return _Context(episode, episode.reward, group_id(episode, step), step, mode)


def _build(ctx: _Context, sorted_calls: _EpisodeCalls) -> list[Sample]:
    build = _merged_samples if ctx.mode == "merged" else _per_call_samples
    return build(ctx, sorted_calls.sequences)


# ---- public API ------------------------------------------------------------------------------------------


def assemble_episode(
    episode: Episode,
    calls: list[CallRecord],
    *,
    mode: Mode = "merged",
    include_side_calls: bool = False,
    step: int | None = None,
) -> list[Sample]:
    """The training samples of one episode (see the module docstring). Pure: reads only its arguments.
    An infrastructure failure or an episode without reward gives []."""
    checked_mode(mode)  # a caller without types may pass any string
    if drop_reason(episode) is not None:
        return []
    return _build(_context(episode, mode, step), _sort_calls(calls, include_side_calls, episode))


def assemble(
    episodes: Iterable[tuple[Episode, list[CallRecord]]],
    *,
    mode: Mode = "merged",
    include_side_calls: bool = False,
    final_only: bool = True,
    step: int | None = None,
) -> tuple[list[Sample], AssemblyMetrics]:
    """Samples of many (episode, its calls) pairs, and the metrics of the run. Pure.

    `final_only`: leave out episodes that are not final (`openforge.store.final`: attempts the orchestrator
    retried, and unfinished episodes), counted as `not_final`."""
    checked_mode(mode)  # a caller without types may pass any string
    metrics = AssemblyMetrics(mode=mode)
    samples: list[Sample] = []
    for episode, calls in episodes:
        reason = "not_final" if final_only and not is_final(episode) else drop_reason(episode)
        if reason is not None:
            _bump(metrics.episodes_dropped, reason)
            metrics.calls_in_dropped_episodes += len(calls)
            continue
        sorted_calls = _sort_calls(calls, include_side_calls, episode)
        ctx = _context(episode, mode, step)
        episode_samples = _build(ctx, sorted_calls)
        samples.extend(episode_samples)
        _count_episode(metrics, calls, sorted_calls)
        _count_tokens(metrics, sorted_calls, len(episode_samples))
    metrics.samples = len(samples)
    return samples, metrics


def _count_episode(metrics: AssemblyMetrics, calls: list[CallRecord], sorted_calls: _EpisodeCalls) -> None:
    metrics.episodes_used += 1
    metrics.calls_total += len(calls)
    metrics.calls_merged += sorted_calls.merged
    metrics.calls_opening += sorted_calls.opening
    for reason, count in sorted_calls.broken.items():
        _bump(metrics.calls_broken, reason, count)
    metrics.side_calls += sorted_calls.side
    metrics.side_calls_excluded += sorted_calls.side_excluded
    metrics.calls_errored += sorted_calls.errored
    metrics.calls_late += sorted_calls.late
    metrics.calls_empty += sorted_calls.empty
    metrics.calls_without_logprobs += sorted_calls.without_logprobs


def _count_tokens(metrics: AssemblyMetrics, sorted_calls: _EpisodeCalls, samples_made: int) -> None:
    """Both modes' token counts, from the sequences alone (without building the other mode's samples)."""
    for seq in sorted_calls.sequences:
        trained = [c for c in seq.calls if c.output_ids]
        if not trained:
            continue
        outputs = sum(len(c.output_ids) for c in trained)
        metrics.training_tokens["merged"] += outputs
        metrics.training_tokens["per-call"] += outputs
        metrics.sequence_tokens["merged"] += seq.length
        metrics.sequence_tokens["per-call"] += sum(len(c.prompt_ids) + len(c.output_ids) for c in trained)
        metrics.samples_by_mode["merged"] += 1
        metrics.samples_by_mode["per-call"] += len(trained)


def assemble_run(
    store: TrajectoryStore | str | os.PathLike,
    *,
    mode: Mode = "merged",
    include_side_calls: bool = False,
    episodes: Iterable[Episode | str] | None = None,
    final_only: bool = True,
    step: int | None = None,
) -> tuple[list[Sample], AssemblyMetrics]:
    """`assemble` over the episodes of a run's store (a `TrajectoryStore`, or a run directory to open).
    `episodes`: only these (Episode objects or ids), else every episode of the run, oldest first."""
    from openforge.store import TrajectoryStore  # only the wrapper touches storage

    if isinstance(store, (str, os.PathLike)):
        with TrajectoryStore.open(store) as opened:
            return assemble_run(
                opened,
                mode=mode,
                include_side_calls=include_side_calls,
                episodes=episodes,
                final_only=final_only,
                step=step,
            )
    chosen = _choose_episodes(store, episodes)
    pairs = ((episode, store.list_calls(episode.id)) for episode in chosen)  # one episode in memory at a time
    return assemble(pairs, mode=mode, include_side_calls=include_side_calls, final_only=final_only, step=step)


def _choose_episodes(store: TrajectoryStore, episodes: Iterable[Episode | str] | None) -> list[Episode]:
    if episodes is None:
        return store.list_episodes()
    chosen = []
    for item in episodes:
        if isinstance(item, Episode):
            chosen.append(item)
            continue
        episode = store.get_episode(item)
        if episode is None:
            raise KeyError(f"no episode {item!r} in {store.run_dir}")
        chosen.append(episode)
    return chosen


__all__ = [
    "MODES",
    "UNEXPECTED_BREAK",
    "AssemblyMetrics",
    "Mode",
    "Sequence",
    "assemble",
    "assemble_episode",
    "assemble_run",
    "drop_reason",
    "extends",
    "group_id",
]
