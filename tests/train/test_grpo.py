"""GRPO: advantages and the clipped loss on hand-computed cases, and what a step does to the policy."""

from __future__ import annotations

import copy
import math
import random

import pytest
import torch

from openforge.train import GRPOConfig, GRPOTrainer, clipped_policy_loss, group_advantages, groups_with_signal
from support.train import make_sample, trained_logprob_sums, with_behaviour_logprobs


@pytest.fixture()
def model(tiny_model):
    torch.manual_seed(0)
    return tiny_model.load_model()


def test_group_advantages_by_hand():
    rewards = [1, 0, 0, 1, 1, 1, 1, 0.0, 0.5, 1.0, 0.7]
    groups = ["a", "a", "a", "a", "b", "b", "b", "c", "c", "c", "lone"]
    adv = group_advantages(rewards, groups)
    third = math.sqrt(1 / 3)  # group a: mean 0.5, unbiased std sqrt((4 × 0.25) / 3)
    expected = [0.5 / third, -0.5 / third, -0.5 / third, 0.5 / third, 0, 0, 0, -1, 0, 1, 0.7]
    expected = [e / (1 + 1e-6 / (third if i < 4 else 0.5 if 7 <= i < 10 else 1)) for i, e in enumerate(expected)]
    assert adv.tolist() == pytest.approx(expected, abs=1e-6)
    assert adv[4:7].tolist() == [0.0, 0.0, 0.0]  # all-equal group: exactly zero
    assert group_advantages(rewards, groups, norm_by_std=False).tolist() == pytest.approx(
        [0.5, -0.5, -0.5, 0.5, 0, 0, 0, -0.5, 0, 0.5, 0.7], abs=1e-6
    )
    assert groups_with_signal(rewards, groups) == {"a", "c"}
    # An all-equal group of a value float32 cannot average exactly still gives exact zeros.
    assert group_advantages([0.1] * 3, ["x"] * 3).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="group ids"):
        group_advantages([1.0, 0.0], ["a"])


def _loss(ratio, adv, **kw):
    new = torch.log(torch.tensor([ratio], dtype=torch.float32))[None]
    res = clipped_policy_loss(new, torch.zeros(1, 1), torch.tensor([[adv]]), torch.ones(1, 1), **kw)
    return float(res.loss), res.clip_fraction, res.clip_fraction_lower


@pytest.mark.parametrize(
    "ratio,adv,loss,clipped,lower",
    [
        (1.1, 1.0, -1.1, 0, 0),  # inside the range: plain ratio × A
        (0.9, -1.0, 0.9, 0, 0),
        (1.5, 1.0, -1.2, 1, 0),  # A > 0, ratio above 1 + 0.2: clipped, no incentive to go further
        (0.5, 1.0, -0.5, 0, 0),  # A > 0, ratio below: the unclipped (larger) loss stands
        (0.5, -1.0, 0.8, 1, 0),  # A < 0, ratio below 1 − 0.2: clipped
        (1.5, -1.0, 1.5, 0, 0),  # A < 0, ratio above: the unclipped loss stands ...
        (5.0, -1.0, 3.0, 0, 1),  # ... up to the dual-clip bound 3 × |A|
        (1.5, 2.0, -2.4, 1, 0),
    ],
)
def test_clipped_loss_by_hand(ratio, adv, loss, clipped, lower):
    got, clip_fraction, lower_fraction = _loss(ratio, adv)
    assert got == pytest.approx(loss, abs=1e-6)
    assert clip_fraction == pytest.approx(clipped, abs=1e-6) and lower_fraction == pytest.approx(lower, abs=1e-6)


def test_clipped_loss_asymmetric_range_and_dual_clip_off():
    assert _loss(1.25, 1.0, clip_low=0.2, clip_high=0.28)[0] == pytest.approx(-1.25, abs=1e-6)
    assert _loss(1.5, 1.0, clip_low=0.2, clip_high=0.28)[0] == pytest.approx(-1.28, abs=1e-6)
    assert _loss(0.5, -1.0, clip_low=0.1, clip_high=0.28)[0] == pytest.approx(0.9, abs=1e-6)
    assert _loss(5.0, -1.0, clip_ratio_c=None)[0] == pytest.approx(5.0, abs=1e-5)


def test_clipped_loss_is_a_token_mean_over_the_mask():
    new = torch.log(torch.tensor([[1.1, 1.5, 7.0], [0.5, 1.0, float("nan")]]))
    old = torch.zeros(2, 3)
    adv = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # masked-out positions may hold anything, even NaN
    res = clipped_policy_loss(new, old, adv, mask)
    assert float(res.loss) == pytest.approx((-1.1 - 1.2 + 0.8 + 1.0) / 4, abs=1e-6)
    assert res.clip_fraction == pytest.approx(0.5, abs=1e-6)
    assert res.approx_kl == pytest.approx(-(math.log(1.1) + math.log(1.5) + math.log(0.5)) / 4, abs=1e-6)
    assert float(clipped_policy_loss(new, old, adv, mask, num_tokens=8).loss) == pytest.approx(
        (-1.1 - 1.2 + 0.8 + 1.0) / 8, abs=1e-6
    )


def _groups(rng, model, rewards_by_group, temperature=None):
    samples = [
        make_sample(rng, g, r, length=20, prompt=6, temperature=temperature)
        for g, rewards in rewards_by_group.items()
        for r in rewards
    ]
    return with_behaviour_logprobs(model, samples)


def test_step_raises_positive_and_lowers_negative_samples(model):
    rng = random.Random(10)
    samples = _groups(rng, model, {"a": [1, 1, 0, 0], "b": [0, 1, 0, 1]})
    before = trained_logprob_sums(model, samples)
    trainer = GRPOTrainer(model, GRPOConfig())  # the quickstart's settings: lr 2e-4, clip 0.2
    metrics = trainer.step(samples)
    after = trained_logprob_sums(model, samples)
    delta = after - before
    positive = [i for i, s in enumerate(samples) if s.reward == 1]
    negative = [i for i, s in enumerate(samples) if s.reward == 0]
    assert all(delta[i] > 0 for i in positive), delta
    assert all(delta[i] < 0 for i in negative), delta
    # On-policy first step: ratios are 1, nothing clipped, no divergence yet.
    assert metrics.updated and metrics.step == 0 and trainer.step_count == 1
    assert metrics.clip_fraction == 0.0 and abs(metrics.approx_kl) < 1e-5
    assert metrics.groups_with_signal == 2 and metrics.groups_total == 2
    assert metrics.samples == 8 and metrics.tokens == 8 * 14
    assert abs(metrics.mean_advantage) < 1e-6 and abs(metrics.loss) < 1e-5  # Σ A = 0 per group, ratio 1
    # A second step on the same (now off-policy) samples sees the divergence.
    second = trainer.step(samples)
    assert second.approx_kl != 0.0 and second.step == 1


def test_groups_without_signal_are_skipped(model):
    rng = random.Random(11)
    samples = _groups(rng, model, {"same1": [1, 1, 1], "same0": [0, 0, 0], "mixed": [1, 0, 0]})
    reference = copy.deepcopy(model)
    metrics = GRPOTrainer(model, GRPOConfig()).step(samples)
    assert (metrics.groups_with_signal, metrics.groups_total, metrics.samples) == (1, 3, 3)
    assert metrics.tokens == 3 * 14

    flat = _groups(rng, model, {"same1": [1, 1], "same0": [0, 0]})
    snapshot = [p.detach().clone() for p in reference.parameters()]
    trainer = GRPOTrainer(reference, GRPOConfig())
    metrics = trainer.step(flat)
    assert not metrics.updated and metrics.groups_with_signal == 0 and trainer.step_count == 0
    assert all(torch.equal(p, q) for p, q in zip(reference.parameters(), snapshot))


def test_new_logprobs_use_the_sampling_temperature(model):
    """Behaviour logprobs recorded at temperature 0.7: the first step's ratios are 1 only if the trainer also
    divides by 0.7 (from the sample's metadata, or the configured rollout temperature)."""
    rng = random.Random(12)
    samples = [make_sample(rng, "g", r, length=20, prompt=6) for r in (1, 0, 1, 0)]
    samples = with_behaviour_logprobs(model, samples, temperature=0.7)
    right = GRPOTrainer(copy.deepcopy(model), GRPOConfig(temperature=0.7)).step(samples)
    wrong = GRPOTrainer(copy.deepcopy(model), GRPOConfig(temperature=1.0)).step(samples)
    assert abs(right.approx_kl) < 1e-5 and right.clip_fraction == 0.0
    assert abs(wrong.approx_kl) > 1e-2
    tagged = [s.model_copy(update={"metadata": {"temperature": 0.7}}) for s in samples]
    assert abs(GRPOTrainer(copy.deepcopy(model), GRPOConfig(temperature=1.0)).step(tagged).approx_kl) < 1e-5


def test_micro_batched_step_equals_one_pass(model):
    rng = random.Random(13)
    samples = [make_sample(rng, g, r, length=rng.randrange(14, 30), prompt=5) for g in "abc" for r in (1, 0, 0.5)]
    samples = with_behaviour_logprobs(model, samples)
    a, b = copy.deepcopy(model), copy.deepcopy(model)
    ma = GRPOTrainer(a, GRPOConfig(), optimizer=torch.optim.SGD(a.parameters(), lr=1.0)).step(samples)
    mb = GRPOTrainer(
        b, GRPOConfig(max_tokens_per_micro_batch=60), optimizer=torch.optim.SGD(b.parameters(), lr=1.0)
    ).step(samples)
    assert ma.loss == pytest.approx(mb.loss, abs=1e-6) and ma.tokens == mb.tokens
    assert ma.grad_norm == pytest.approx(mb.grad_norm, rel=1e-4)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6)


def test_samples_without_behaviour_logprobs_are_refused(model):
    rng = random.Random(14)
    samples = [make_sample(rng, "g", r) for r in (1, 0)]
    samples[0] = samples[0].model_copy(update={"metadata": {"logprobs_missing": [0]}})
    with pytest.raises(ValueError, match="without logprobs"):
        GRPOTrainer(model).step(samples)
