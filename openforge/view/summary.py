"""A store's results in numbers, from its final episodes (the store's one rule, `openforge.store.final`; one SQL
read, no call rows): pass@k and pass^k overall (one unit per task × harness, as `openforge eval` reports them) and
per harness, outcomes (with the episodes not finished yet, which are not final), the reasons of infrastructure
failures, and per-task counts for comparing two runs."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from openforge.core import GRADED_OUTCOMES, Outcome
from openforge.eval.metrics import pass_at_1, pass_table, task_counts
from openforge.store import TrajectoryStore

_GRADED = frozenset(o.value for o in GRADED_OUTCOMES)


@dataclass
class StoreSummary:
    episodes: int  # every attempt
    final: int
    graded: int
    outcomes: dict[str, int]  # of the final episodes, and "unfinished": episodes with no outcome yet
    pass_at_1: float | None
    pass_at_k: dict[str, float | None]
    pass_hat_k: dict[str, float | None]
    by_harness: dict[str, dict[str, dict[str, float | None]]]
    units: dict[str, tuple[int, int]]  # "task|harness" → (graded samples, passed)
    reasons: list[tuple[str, str, int]] = field(default_factory=list)  # (outcome, reason, episodes), most first
    mean_reward: float | None = None


def summarize(store: TrajectoryStore) -> StoreSummary:
    rows = store.final_results()
    outcomes = Counter(outcome for _, _, outcome, _, _ in rows if outcome)  # a final episode has one
    unfinished = store.count_unfinished()
    if unfinished:
        outcomes["unfinished"] = unfinished
    graded = [
        (task, harness, outcome == Outcome.passed.value, reward)
        for task, harness, outcome, _, reward in rows
        if outcome in _GRADED
    ]
    results = [(f"{t}|{h}", passed) for t, h, passed, _ in graded]
    units = task_counts(results)
    table = pass_table(units)
    by_harness: dict[str, list] = defaultdict(list)
    for task, harness, passed, _ in graded:
        by_harness[harness or "?"].append((task, passed))
    reasons = Counter(
        (outcome, reason or "(no reason recorded)")
        for _, _, outcome, reason, _ in rows
        if outcome and outcome not in _GRADED
    )
    rewards = [r for *_, r in graded if r is not None]
    return StoreSummary(
        episodes=store.count_episodes(),
        final=len(rows),
        graded=len(graded),
        outcomes=dict(sorted(outcomes.items(), key=lambda kv: (-kv[1], kv[0]))),
        pass_at_1=pass_at_1(results),
        pass_at_k=table["pass_at_k"],
        pass_hat_k=table["pass_hat_k"],
        by_harness={h: pass_table(task_counts(pairs)) for h, pairs in sorted(by_harness.items())},
        units=units,
        reasons=[(o, r, n) for (o, r), n in reasons.most_common(50)],
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
    )


@dataclass
class UnitDiff:
    unit: str  # task|harness
    a: tuple[int, int] | None
    b: tuple[int, int] | None

    @staticmethod
    def _rate(counts: tuple[int, int] | None) -> float | None:
        return counts[1] / counts[0] if counts and counts[0] else None

    @property
    def a_pass(self) -> float | None:
        return self._rate(self.a)

    @property
    def b_pass(self) -> float | None:
        return self._rate(self.b)

    @property
    def delta(self) -> float | None:
        if self.a_pass is None or self.b_pass is None:
            return None
        return self.b_pass - self.a_pass


def unit_diffs(a: StoreSummary, b: StoreSummary) -> list[UnitDiff]:
    """Every task × harness of either run, the largest changes first, then those only one run has."""
    diffs = [UnitDiff(u, a.units.get(u), b.units.get(u)) for u in sorted(set(a.units) | set(b.units))]
    return sorted(diffs, key=lambda d: (d.delta is None, -abs(d.delta or 0.0), d.unit))
