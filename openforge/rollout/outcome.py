"""How an attempt ended: the one rule that tells the agent's failures from the infrastructure's
(`classify_agent_run`), and the one way both episode runners (the orchestrator's, in sandboxes, and the
in-process one for generated families) write it to the store.

The rule (docs/design.md, "Outcome classes"; the README's outcome table): a policy must not escape a bad reward
by hanging or crashing, so whatever the agent's own time and actions cause is **its failure** — graded `failed`,
reward 0, the reason saying so — and only what the infrastructure causes is dropped from training:

1. the sandbox died → `sandbox_error`;
2. a model call failed in the proxy or backend (recorded with `call_error`) → `proxy_error`;
3. the harness says its model API failed in a way the agent did not cause (`HarnessAdapter.infrastructure_error`,
   e.g. react's exit 3 for anything but a 400/413 refusal of the conversation) → `harness_crash`;
4. the model never answered (no call without an error): the model had no say → `harness_crash` (or `timeout` if
   the harness hung before any reply);
5. the harness ran past the agent timeout (its commands, its turns: the model's generation counts, as in Harbor and
   Terminal-Bench) → `failed`, reward 0, reason `agent timeout: ...`;
6. the harness exited non-zero after the model had answered (a tool call killed it, the model's output made it
   fail, the agent's commands exhausted the memory) → `failed`, reward 0, reason `agent: ...`;
7. otherwise the episode is graded by its verifier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openforge.core import Outcome
from openforge.store import EpisodeNotFoundError, TrajectoryStore


@dataclass
class AttemptResult:
    episode_id: str
    outcome: Outcome
    reward: float | None = None
    reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    transcript: dict[str, Any] = field(default_factory=dict)
    tampered: list[str] = field(default_factory=list)  # paths the tamper check found (outcome failed)
    grading_notes: list[str] = field(default_factory=list)  # what grading could not enforce in this sandbox
    retry: bool = True  # False: an infrastructure failure that another attempt would meet again (the task's setup)

    @property
    def infrastructure_failure(self) -> bool:
        return self.outcome.is_infrastructure_failure


AGENT_TIMEOUT = "agent timeout"
AGENT_FAULT = "agent"


@dataclass(frozen=True)
class AgentRun:
    """What the harness's run looked like, as `classify_agent_run` needs it."""

    harness: str
    exit_code: int
    timed_out: bool
    timeout_s: float
    answered_calls: int  # model calls answered without an error
    failed_call: str | None = None  # the `call_error` of a failed model call, if any
    sandbox_alive: bool = True
    sandbox_reason: str = ""
    oom_killed: bool = False
    infrastructure_error: str | None = None  # the harness's own word (`HarnessAdapter.infrastructure_error`)
    output_tail: str = ""


def classify_agent_run(run: AgentRun) -> tuple[Outcome, str] | None:
    """(outcome, reason) when the episode is not to be graded by its verifier — an infrastructure failure, or
    the agent's failure (`failed`, reward 0) — None when it is. The rule is the module docstring's."""
    if not run.sandbox_alive:
        return Outcome.sandbox_error, f"the sandbox died: {run.sandbox_reason}"
    if run.failed_call is not None:
        return Outcome.proxy_error, f"model call failed: {run.failed_call}"
    if run.exit_code != 0 and not run.timed_out and run.infrastructure_error is not None:
        return Outcome.harness_crash, f"{run.harness} exited {run.exit_code}: {run.infrastructure_error}"
    if run.answered_calls == 0:
        if run.timed_out:
            return Outcome.timeout, f"the harness ran past {run.timeout_s:g}s before the model answered once"
        if run.oom_killed and run.exit_code != 0:
            return (
                Outcome.sandbox_error,
                f"out of memory before the model answered: {run.harness} exited {run.exit_code}",
            )
        if run.exit_code != 0:
            return Outcome.harness_crash, f"{run.harness} exited {run.exit_code}: {run.output_tail}"
        return Outcome.harness_crash, f"{run.harness} never called the model"
    if run.timed_out:
        return Outcome.failed, f"{AGENT_TIMEOUT}: the harness ran past {run.timeout_s:g}s"
    if run.exit_code != 0:
        memory = " (the agent's commands hit the sandbox's memory limit)" if run.oom_killed else ""
        return Outcome.failed, (
            f"{AGENT_FAULT}: {run.harness} exited {run.exit_code} after the model's last "
            f"reply{memory}: {run.output_tail}"
        )
    return None


def agent_caused(reason: str | None) -> bool:
    """Whether an outcome reason is one of `classify_agent_run`'s agent failures (timeout or exit)."""
    return reason is not None and reason.startswith((f"{AGENT_TIMEOUT}:", f"{AGENT_FAULT}:"))


def agent_failure(result: AttemptResult, reason: str) -> None:
    """Mark an attempt as the agent's failure: `failed`, reward 0, the reason kept."""
    result.outcome, result.reward, result.reason = Outcome.failed, 0.0, reason


def record_outcome(store: TrajectoryStore, result: AttemptResult, final: bool) -> None:
    """The attempt's outcome, reason, timings, transcript summary and the tamper check's findings on its
    episode; `final` marks the slot's last attempt (the one training and reports use). A grade (or a verifier
    failure) is recorded as the verifier's result, which sets the episode's reward."""
    episode = store.get_episode(result.episode_id)
    if episode is None:
        raise EpisodeNotFoundError(result.episode_id)
    metadata = {
        **episode.metadata,
        "final": final,
        "timings": result.timings,
        "transcript": {k: v for k, v in result.transcript.items() if k != "events"},
    }
    if result.tampered:  # the viewer and the store's queries flag an episode by this key
        metadata["tampered"] = list(result.tampered)
    if result.grading_notes:
        metadata["grading_notes"] = list(result.grading_notes)
    store.update_episode(result.episode_id, outcome=result.outcome, outcome_reason=result.reason, metadata=metadata)
    if result.reward is not None or result.outcome is Outcome.verifier_error:
        store.record_verifier_result(
            result.episode_id, result.reward, {"outcome": result.outcome.value, "reason": result.reason}
        )


def call_timings(spans: list[tuple[float, float | None]], launched_at: float) -> dict[str, float]:
    """Where the harness's time went, from its calls' (started_at, finished_at): `harness_start_s`, from its launch
    to its first model call (process start, its own set-up), and `model_s`, the calls' time in the proxy
    (queueing and decoding). The rest of `agent_s` is the harness's tools and its own work between calls."""
    if not spans:
        return {}
    return {
        "harness_start_s": max(0.0, min(start for start, _ in spans) - launched_at),
        "model_s": sum(end - start for start, end in spans if end is not None),
    }
