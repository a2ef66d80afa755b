"""pass@k and pass^k, estimated without bias from n >= k samples per task.

- pass@k: the chance that at least one of k samples passes: 1 - C(n-c, k) / C(n, k)   (Chen et al., 2021)
- pass^k: the chance that all k samples pass:               C(c, k) / C(n, k)
with n samples of a task of which c passed. Overall figures are the mean over tasks.

Only graded episodes count (outcome `passed`, `failed` or `verifier_failed`: `GRADED_OUTCOMES`); infrastructure
failures are not samples.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n):
        raise ValueError(f"need 0 <= passed ({c}) <= samples ({n})")
    if not (1 <= k <= n):
        raise ValueError(f"k must be between 1 and the number of samples ({n}), got {k}")


def task_counts(results: Iterable[tuple[str, bool]]) -> dict[str, tuple[int, int]]:
    """(task, passed) pairs → {task: (samples, passes)}."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for task, passed in results:
        counts[task][0] += 1
        counts[task][1] += int(passed)
    return {t: (n, c) for t, (n, c) in counts.items()}


def mean_over_tasks(
    counts: dict[str, tuple[int, int]], k: int, estimator: Callable[[int, int, int], float]
) -> float | None:
    """Mean of `estimator(n, c, k)` over the tasks with at least k graded samples (None if there are none)."""
    values = [estimator(n, c, k) for n, c in counts.values() if n >= k]
    return sum(values) / len(values) if values else None


def pass_at_1(results: Iterable[tuple[str, bool]]) -> float | None:
    """pass@1 of graded samples given as (unit, passed) pairs: the mean over units (a task, or a task × harness) of
    the share of the unit's samples that passed; None when there is none. With one sample per unit (a held-out
    evaluation) it is the share of samples that passed. `pass_table`'s "1" is the same figure."""
    return mean_over_tasks(task_counts(results), 1, pass_at_k)


def pass_table(counts: dict[str, tuple[int, int]]) -> dict[str, dict[str, float | None]]:
    """{"pass_at_k": {"1": ..., "2": ...}, "pass_hat_k": {...}} for every k up to the largest n."""
    max_n = max((n for n, _ in counts.values()), default=0)
    ks = range(1, max_n + 1)
    return {
        "pass_at_k": {str(k): mean_over_tasks(counts, k, pass_at_k) for k in ks},
        "pass_hat_k": {str(k): mean_over_tasks(counts, k, pass_hat_k) for k in ks},
    }
