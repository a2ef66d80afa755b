"""How an attempt ended, and the one way both episode runners (the orchestrator's, in sandboxes, and the
in-process one for generated families) write it to the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openforge.core import Outcome
from openforge.store import TrajectoryStore


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

    @property
    def infrastructure_failure(self) -> bool:
        return self.outcome.is_infrastructure_failure


def record_outcome(store: TrajectoryStore, result: AttemptResult, final: bool) -> None:
    """The attempt's outcome, reason, timings, transcript summary and the tamper check's findings on its
    episode; `final` marks the slot's last attempt (the one training and reports use). A grade (or a verifier
    failure) is recorded as the verifier's result, which sets the episode's reward."""
    episode = store.get_episode(result.episode_id)
    metadata = {**episode.metadata, "final": final, "timings": result.timings,
                "transcript": {k: v for k, v in result.transcript.items() if k != "events"}}
    if result.tampered:  # the viewer and the store's queries flag an episode by this key
        metadata["tampered"] = list(result.tampered)
    if result.grading_notes:
        metadata["grading_notes"] = list(result.grading_notes)
    store.update_episode(result.episode_id, outcome=result.outcome, outcome_reason=result.reason,
                         metadata=metadata)
    if result.reward is not None or result.outcome is Outcome.verifier_error:
        store.record_verifier_result(result.episode_id, result.reward, {"outcome": result.outcome.value,
                                                                         "reason": result.reason})
