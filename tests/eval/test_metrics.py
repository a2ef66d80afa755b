"""pass@k and pass^k against hand-computed cases."""

from __future__ import annotations

import itertools

import pytest

from openforge.eval.metrics import mean_over_tasks, pass_at_1, pass_at_k, pass_hat_k, pass_table, task_counts


def test_hand_computed_pass_at_k():
    # n=5, c=2: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@4 = 1 - 0 (only 3 failures)
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)
    assert pass_at_k(5, 2, 4) == 1.0
    assert pass_at_k(4, 0, 2) == 0.0 and pass_at_k(4, 4, 1) == 1.0


def test_hand_computed_pass_hat_k():
    # n=5, c=3: pass^2 = C(3,2)/C(5,2) = 3/10; pass^3 = 1/10; pass^4 = 0
    assert pass_hat_k(5, 3, 1) == pytest.approx(0.6)
    assert pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert pass_hat_k(5, 3, 3) == pytest.approx(0.1)
    assert pass_hat_k(5, 3, 4) == 0.0


@pytest.mark.parametrize("n,c,k", [(4, 2, 2), (6, 3, 3), (5, 1, 2), (5, 4, 3)])
def test_estimators_equal_enumeration_over_k_subsets(n, c, k):
    """Unbiased: the mean over every k-subset of the n samples of 'any pass' / 'all pass'."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def test_table_means_over_tasks_and_skips_tasks_with_too_few_samples():
    counts = task_counts([("a", True), ("a", False), ("b", False), ("b", False), ("c", True)])
    assert counts == {"a": (2, 1), "b": (2, 0), "c": (1, 1)}
    table = pass_table(counts)
    assert table["pass_at_k"]["1"] == pytest.approx((0.5 + 0 + 1) / 3)
    assert table["pass_at_k"]["2"] == pytest.approx((1.0 + 0) / 2)  # c has only 1 sample
    assert table["pass_hat_k"]["2"] == pytest.approx(0.0)
    assert mean_over_tasks({}, 1, pass_at_k) is None


def test_pass_at_1_is_the_tables_and_with_one_sample_a_unit_the_share_passed():
    """The one pass@1: `openforge eval`'s table, the viewer's run page and the training's held-out evaluation."""
    results = [("a", True), ("a", False), ("a", False), ("b", True), ("c", False)]
    assert pass_at_1(results) == pass_table(task_counts(results))["pass_at_k"]["1"] == pytest.approx((1 / 3 + 1) / 3)
    for passed in itertools.product((True, False), repeat=7):  # one sample per unit: exactly passed / samples
        assert pass_at_1([(f"t{i}", p) for i, p in enumerate(passed)]) == sum(passed) / len(passed)
    assert pass_at_1([]) is None


def test_bad_arguments():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_hat_k(3, 1, 4)
