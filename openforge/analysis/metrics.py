"""Behaviour metrics of one episode and their aggregates. Each definition is the README's, word for word in
spirit: computed from an episode's tool steps (`trace.py`), its outcome, and optionally a reference episode of
the same (task, harness) — the oracle's — for coverage and efficiency."""

from __future__ import annotations

from collections.abc import Iterable
from statistics import mean

from pydantic import BaseModel, Field

from openforge.analysis.trace import EpisodeTrace, ToolStep
from openforge.core import Episode, Outcome
from openforge.harness.tools import ToolKind


class EpisodeBehaviour(BaseModel):
    episode_id: str
    task: str | None
    harness: str | None
    outcome: str | None
    graded: bool  # passed or failed (infrastructure failures are not the policy's behaviour)
    passed: bool
    calls: int
    sampled_tokens: int
    seconds: float
    breaks: int
    tool_steps: int
    tool_mix: dict[str, int]  # steps per ToolKind
    failed_steps: int
    met_error: bool  # at least one tool result reported a failure
    continued_after_error: bool  # a tool step followed the first failed one
    recovered: bool  # met an error and still passed
    wrote: bool  # made a state-changing step
    self_verified: bool | None  # after its last state-changing step, a check step (None: never wrote)
    parse_errors: int
    format_interrupted: bool  # the last call's reply was unparseable tool markup and the episode did not pass
    length_capped: int
    kinds_used: list[str]
    coverage: float | None = None  # share of the needed tool kinds used (None: nothing known to need)
    calls_vs_reference: float | None = None  # calls / the reference episode's calls
    tokens_vs_reference: float | None = None  # sampled tokens / the reference episode's
    faults: list[str] = Field(default_factory=list)  # kinds of the faults injected into this episode


def behaviour(
    episode: Episode, trace: EpisodeTrace, needed: set[str] | None = None, reference: EpisodeTrace | None = None
) -> EpisodeBehaviour:
    """One episode's metrics. `needed`: the tool kinds its task needs (task metadata, or the reference's)."""
    outcome = episode.outcome
    graded = outcome is not None and not outcome.is_infrastructure_failure
    passed = outcome is Outcome.passed
    steps = trace.steps
    first_failure = next((i for i, s in enumerate(steps) if s.failed), None)
    last_write = max((i for i, s in enumerate(steps) if s.writes), default=None)
    mix: dict[str, int] = {}
    for s in steps:
        mix[s.kind.value] = mix.get(s.kind.value, 0) + 1
    kinds = {s.kind.value for s in steps}
    verified: bool | None = None
    if last_write is not None:
        # a check later in the same command line counts (`echo x > f && cat f`), as does any later check step
        same = steps[last_write]
        after_write = any(p.checks for p in same.parts[_last_writing_part(same) + 1 :]) if same.parts else False
        verified = after_write or any(s.checks for s in steps[last_write + 1 :])
    if needed is None and reference is not None:
        needed = {s.kind.value for s in reference.steps}
    needed = {k for k in (needed or set()) if k != ToolKind.other.value}
    return EpisodeBehaviour(
        episode_id=episode.id,
        task=episode.task,
        harness=episode.harness,
        outcome=outcome.value if outcome else None,
        graded=graded,
        passed=passed,
        calls=trace.calls,
        sampled_tokens=trace.sampled_tokens,
        seconds=round(trace.seconds, 3),
        breaks=trace.breaks,
        tool_steps=len(steps),
        tool_mix=mix,
        failed_steps=sum(s.failed for s in steps),
        met_error=first_failure is not None,
        continued_after_error=first_failure is not None and first_failure < len(steps) - 1,
        recovered=first_failure is not None and passed,
        wrote=last_write is not None,
        self_verified=verified,
        parse_errors=trace.parse_errors,
        format_interrupted=trace.last_call_parse_error and not passed,
        length_capped=trace.length_capped,
        kinds_used=sorted(kinds),
        coverage=(len(kinds & needed) / len(needed)) if needed else None,
        calls_vs_reference=(trace.calls / reference.calls) if reference and reference.calls else None,
        tokens_vs_reference=(
            (trace.sampled_tokens / reference.sampled_tokens) if reference and reference.sampled_tokens else None
        ),
        faults=sorted({str(f.get("kind")) for f in episode.metadata.get("faults") or [] if f.get("fired", True)}),
    )


def _last_writing_part(step: ToolStep) -> int:
    return max(i for i, p in enumerate(step.parts) if p.writes) if any(p.writes for p in step.parts) else -1


class BehaviourSummary(BaseModel):
    """Aggregates over a set of episodes (only graded ones: an infrastructure failure is not behaviour)."""

    episodes: int
    graded: int
    pass_rate: float | None
    met_error: int
    continued_after_error: int
    recovered: int
    recovery_rate: float | None  # passed among graded episodes that met a failed tool result
    wrote: int
    self_verified: int
    self_verification_rate: float | None  # verified among graded episodes that changed state
    parse_error_calls: int
    format_interrupted: int
    length_capped_calls: int
    coverage: float | None  # mean over episodes with a known need
    calls_vs_reference: float | None
    tokens_vs_reference: float | None
    tool_mix: dict[str, float]  # share of tool steps per kind
    shell_share: float | None
    mean_calls: float | None
    mean_sampled_tokens: float | None
    mean_seconds: float | None
    mean_breaks: float | None
    recovery_by_fault: dict[str, dict[str, float | int | None]] = Field(default_factory=dict)


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def _mean(values: Iterable[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return mean(vs) if vs else None


def summarise(items: list[EpisodeBehaviour]) -> BehaviourSummary:
    graded = [b for b in items if b.graded]
    errors = [b for b in graded if b.met_error]
    writers = [b for b in graded if b.wrote]
    mix: dict[str, int] = {}
    for b in graded:
        for k, v in b.tool_mix.items():
            mix[k] = mix.get(k, 0) + v
    steps = sum(mix.values())
    by_fault: dict[str, dict[str, float | int | None]] = {}
    for kind in sorted({f for b in graded for f in b.faults}):
        hit = [b for b in graded if kind in b.faults]
        met = [b for b in hit if b.met_error]
        by_fault[kind] = {
            "episodes": len(hit),
            "passed": sum(b.passed for b in hit),
            "pass_rate": _rate(sum(b.passed for b in hit), len(hit)),
            "met_error": len(met),
            "recovered": sum(b.recovered for b in met),
            "recovery_rate": _rate(sum(b.recovered for b in met), len(met)),
        }
    return BehaviourSummary(
        episodes=len(items),
        graded=len(graded),
        pass_rate=_rate(sum(b.passed for b in graded), len(graded)),
        met_error=len(errors),
        continued_after_error=sum(b.continued_after_error for b in errors),
        recovered=sum(b.recovered for b in errors),
        recovery_rate=_rate(sum(b.recovered for b in errors), len(errors)),
        wrote=len(writers),
        self_verified=sum(bool(b.self_verified) for b in writers),
        self_verification_rate=_rate(sum(bool(b.self_verified) for b in writers), len(writers)),
        parse_error_calls=sum(b.parse_errors for b in graded),
        format_interrupted=sum(b.format_interrupted for b in graded),
        length_capped_calls=sum(b.length_capped for b in graded),
        coverage=_mean(b.coverage for b in graded),
        calls_vs_reference=_mean(b.calls_vs_reference for b in graded),
        tokens_vs_reference=_mean(b.tokens_vs_reference for b in graded),
        tool_mix={k: v / steps for k, v in sorted(mix.items())} if steps else {},
        shell_share=_rate(mix.get(ToolKind.shell.value, 0), steps),
        mean_calls=_mean(b.calls for b in graded),
        mean_sampled_tokens=_mean(b.sampled_tokens for b in graded),
        mean_seconds=_mean(b.seconds for b in graded),
        mean_breaks=_mean(b.breaks for b in graded),
        recovery_by_fault=by_fault,
    )


__all__ = ["BehaviourSummary", "EpisodeBehaviour", "behaviour", "summarise"]
