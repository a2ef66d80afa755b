"""The embedded GRPO agrees with veRL 0.9.1's `core_algos` on the same batch: advantages
(`compute_grpo_outcome_advantage`), the clipped policy loss and its metrics (the registered "vanilla" loss,
`compute_policy_loss_vanilla`), and the loss a `GRPOTrainer` step reports.

veRL's inputs are built as its trainer builds them: response-only (bs, response_length) tensors, the reward on
the last valid response token of `token_level_rewards`, `index` = the group ids as a numpy object array.
Needs veRL's core on CPU torch (installing verl with its dependencies would downgrade transformers):

    pip install --no-deps verl==0.9.1
    pip install "ray>=2.41.0" "tensordict>=0.8.0,<=0.10.0,!=0.9.0" omegaconf codetiming

With CI=true a missing veRL fails this file instead of skipping.
"""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
import torch

from conftest import unavailable
from openforge.train import GRPOConfig, GRPOTrainer, clipped_policy_loss, collate, group_advantages
from openforge.train.losses import token_logprobs
from support.train import make_sample, with_behaviour_logprobs


@pytest.fixture(scope="module")
def core_algos():
    try:
        from verl.trainer.ppo import core_algos
    except ImportError as e:
        unavailable(
            f"veRL is not installed ({e}): pip install --no-deps verl==0.9.1 && pip install "
            '"ray>=2.41.0" "tensordict>=0.8.0,<=0.10.0,!=0.9.0" omegaconf codetiming'
        )
    return core_algos


def actor_config(clip_low: float, clip_high: float):
    from verl.workers.config import ActorConfig

    # The fields a CPU-only config must name; the loss reads clip_ratio*, clip_ratio_c, global_batch_info.
    return ActorConfig(
        strategy="fsdp",
        rollout_n=1,
        ppo_micro_batch_size_per_gpu=1,
        clip_ratio=clip_low,
        clip_ratio_low=clip_low,
        clip_ratio_high=clip_high,
        clip_ratio_c=3.0,
        loss_agg_mode="token-mean",
    )


def response_view(samples, batch):
    """veRL's layout: each sample's tokens from its prompt_length on, right-padded to the longest response.
    Returns (gather index (bs, R), response_mask (bs, R))."""
    lengths = batch.attention_mask.sum(dim=1).tolist()
    width = max(n - s.prompt_length for n, s in zip(lengths, samples))
    index = torch.zeros(len(samples), width, dtype=torch.long)
    valid = torch.zeros(len(samples), width)
    for row, (n, s) in enumerate(zip(lengths, samples)):
        r = n - s.prompt_length
        index[row, :r] = torch.arange(s.prompt_length, n)
        valid[row, :r] = 1
    response_mask = batch.loss_mask.gather(1, index) * valid
    return index, response_mask


def verl_advantages(core_algos, samples, response_mask):
    token_level_rewards = torch.zeros_like(response_mask)
    for row, s in enumerate(samples):
        last = int(torch.nonzero(response_mask[row])[-1])  # the last valid response token carries the reward
        token_level_rewards[row, last] = s.reward
    index = np.array([s.group_id for s in samples], dtype=object)
    advantages, returns = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards,
        response_mask=response_mask,
        index=index,
        epsilon=1e-6,
        norm_adv_by_std_in_grpo=True,
    )
    return advantages


@pytest.fixture()
def batch_of_samples(tiny_model):
    """Groups of several sizes and reward patterns (one all-equal), multi-turn masks, different prompt lengths."""
    rng = random.Random(20)
    plan = {"t1": [1, 0, 0, 1, 1, 0, 0, 0], "t2": [0.25, 0.5, 1.0, 0.0], "t3": [1, 1, 1], "t4": [0, 1], "t5": [0.75]}
    samples = []
    for group, rewards in plan.items():
        for r in rewards:
            length = rng.randrange(16, 40)
            prompt = rng.randrange(3, 10)
            hole = (prompt + 4, prompt + 7) if rng.random() < 0.5 and length > prompt + 9 else None
            samples.append(make_sample(rng, group, float(r), length=length, prompt=prompt, tool_turn=hole))
    model = tiny_model.load_model()
    return model, with_behaviour_logprobs(model, samples)


def test_advantages_equal_verl(core_algos, batch_of_samples):
    _, samples = batch_of_samples
    batch = collate(samples)
    index, response_mask = response_view(samples, batch)
    theirs = verl_advantages(core_algos, samples, response_mask)
    ours = group_advantages([s.reward for s in samples], [s.group_id for s in samples])
    assert (ours[:, None] * response_mask - theirs).abs().max() < 1e-6
    # And as the trainer lays them out (full sequences, broadcast over trained tokens):
    full = collate(samples, advantages=ours.tolist()).advantages
    assert (full.gather(1, index) * response_mask - theirs).abs().max() < 1e-6


@pytest.mark.parametrize("clip_low,clip_high", [(0.2, 0.2), (0.2, 0.28)])
def test_policy_loss_equals_verl_vanilla(core_algos, batch_of_samples, clip_low, clip_high):
    _, samples = batch_of_samples
    batch = collate(samples)
    index, response_mask = response_view(samples, batch)
    advantages = verl_advantages(core_algos, samples, response_mask)
    old = batch.old_logprobs.gather(1, index)
    # A policy that moved: ratios spread over [e^-2, e^2] so every clip branch (and dual clip: > 3) is taken.
    generator = torch.Generator().manual_seed(0)
    new = old + (torch.rand(old.shape, generator=generator) * 4 - 2) * response_mask

    loss_fn = core_algos.get_policy_loss_fn("vanilla")
    assert loss_fn is core_algos.compute_policy_loss_vanilla
    theirs, metrics = loss_fn(
        old_log_prob=old,
        log_prob=new,
        advantages=advantages,
        response_mask=response_mask,
        loss_agg_mode="token-mean",
        config=actor_config(clip_low, clip_high),
    )
    ours = clipped_policy_loss(
        new, old, advantages, response_mask, clip_low=clip_low, clip_high=clip_high, clip_ratio_c=3.0
    )
    assert abs(float(ours.loss) - float(theirs)) < 1e-6
    assert abs(ours.clip_fraction - metrics["actor/pg_clipfrac"]) < 1e-6
    assert abs(ours.clip_fraction_lower - metrics["actor/pg_clipfrac_lower"]) < 1e-6
    assert abs(ours.approx_kl - metrics["actor/ppo_kl"]) < 1e-6
    assert 0 < ours.clip_fraction < 1 and ours.clip_fraction_lower > 0  # the cases were really exercised


def test_trainer_step_loss_equals_verl(core_algos, batch_of_samples):
    """The loss a GRPOTrainer step reports (forward pass at the sampling temperature, groups without signal
    dropped) is veRL's vanilla loss on the same kept samples, new logprobs and advantages."""
    model, samples = batch_of_samples
    moved = copy.deepcopy(model)  # a policy one update away from the one that sampled
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    kept = [s for s in samples if s.group_id in {"t1", "t2", "t4"}]  # t3 all-equal, t5 alone: no signal
    batch = collate(kept)
    index, response_mask = response_view(kept, batch)
    with torch.no_grad():
        new = token_logprobs(moved, batch).gather(1, index)
    theirs, metrics = core_algos.compute_policy_loss_vanilla(
        batch.old_logprobs.gather(1, index),
        new,
        verl_advantages(core_algos, kept, response_mask),
        response_mask,
        "token-mean",
        actor_config(0.2, 0.2),
    )

    step = GRPOTrainer(moved, GRPOConfig(max_tokens_per_micro_batch=200)).step(samples)
    assert step.groups_with_signal == 3 and step.groups_total == 5 and step.samples == len(kept)
    assert abs(step.loss - float(theirs)) < 1e-6
    assert abs(step.clip_fraction - metrics["actor/pg_clipfrac"]) < 1e-6
    assert abs(step.approx_kl - metrics["actor/ppo_kl"]) < 1e-6
