"""Difficulty during training: pass rates re-estimated from GRPO's own rollouts, tasks dropped once they carry
no signal, and what the groups without signal cost.

On each visit (a step that drew it) a task is *saturated* when every graded episode of it passed and
*impossible* when none did. After `rl.drop_after` consecutive visits of the same kind it is dropped from the
pool the steps draw from (a mixed visit, or one of the other kind, starts the count again). Only task
directories are tracked: generated families draw fresh instances every step, so no task is visited twice.
The tracker is rebuilt from RUN/steps.jsonl on --resume (each `StepRecord` keeps its tasks' results), so a
resumed run drops what an uninterrupted one would have.

A GRPO group (task, harness) whose rewards are all equal trains nothing; `no_signal_cost` counts its
episodes and the seconds they took (episode wall time, summed: episodes run side by side, so this is compute,
not the step's wall time).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

SATURATED, IMPOSSIBLE = "saturated", "impossible"


class GradedEpisode(Protocol):
    task: str
    harness: str
    reward: float | None  # None: not graded (an infrastructure failure)
    seconds: float


@dataclass
class TaskRecord:
    visits: int = 0
    passed: int = 0
    graded: int = 0
    streak_kind: str | None = None
    streak: int = 0

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.graded if self.graded else None


@dataclass
class DifficultyTracker:
    """Per task: visits, passes, and the current run of saturated / impossible visits. `drop_after` None:
    nothing is dropped (pass rates are still kept)."""

    drop_after: int | None = None
    tasks: dict[str, TaskRecord] = field(default_factory=lambda: defaultdict(TaskRecord))
    dropped: dict[str, str] = field(default_factory=dict)  # task → saturated | impossible

    def observe(self, results: dict[str, tuple[int, int]]) -> dict[str, str]:
        """One step's results (task → (passed, graded)); returns the tasks dropped by it, with the reason."""
        newly: dict[str, str] = {}
        for task, (passed, graded) in results.items():
            record = self.tasks[task]
            record.visits += 1
            record.passed += passed
            record.graded += graded
            kind = None if not graded else SATURATED if passed == graded else IMPOSSIBLE if passed == 0 else None
            record.streak = (
                record.streak + 1 if kind is not None and kind == record.streak_kind else int(kind is not None)
            )
            record.streak_kind = kind
            if (
                self.drop_after is not None
                and kind is not None
                and record.streak >= self.drop_after
                and task not in self.dropped
            ):
                newly[task] = self.dropped[task] = kind
        return newly

    @classmethod
    def replay(cls, drop_after: int | None, steps: Iterable[dict[str, tuple[int, int]]]) -> DifficultyTracker:
        tracker = cls(drop_after)
        for results in steps:
            tracker.observe(results)
        return tracker


def task_results(episodes: Iterable[GradedEpisode]) -> dict[str, tuple[int, int]]:
    """task → (passed, graded) over a step's episodes."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in episodes:
        counts = out[e.task]
        if e.reward is not None:
            counts[0] += e.reward >= 1.0
            counts[1] += 1
    return {task: (p, g) for task, (p, g) in out.items()}


@dataclass
class NoSignalCost:
    groups: int = 0
    episodes: int = 0
    seconds: float = 0.0


def no_signal_cost(episodes: Iterable[GradedEpisode]) -> NoSignalCost:
    """The (task, harness) groups whose graded rewards are all equal (GRPO skips them), their episodes —
    infrastructure failures among them included, they ran too — and the seconds those took."""
    groups: dict[tuple[str, str], list[GradedEpisode]] = defaultdict(list)
    for e in episodes:
        groups[(e.task, e.harness)].append(e)
    cost = NoSignalCost()
    for members in groups.values():
        if len({e.reward for e in members if e.reward is not None}) > 1:
            continue
        cost.groups += 1
        cost.episodes += len(members)
        cost.seconds += sum(e.seconds for e in members)
    cost.seconds = round(cost.seconds, 2)
    return cost
