"""GRPO on CPU: one policy-gradient update per batch of rollout samples.

A step: drop the groups sampled by a policy more than `max_staleness` versions old (given the version being
updated), keep the groups whose rewards differ (the others carry no signal), compute each sample's advantage
against its group, recompute the trained tokens' logprobs with a forward pass at the temperature they were
sampled at, and minimise the clipped surrogate against the rollout (behaviour) logprobs recorded at sampling
time, token-mean over every trained token of the batch. No KL term, no reference model. With
`max_staleness` > 0 (asynchronous GRPO) the surrogate is decoupled PPO's: clipped against the proximal policy
(this policy before the update: one more forward pass, no gradient) and weighted per token by
min(π_prox / π_behav, `importance_cap`) (docs/design.md, "Asynchronous GRPO").

Settings that worked on 2 cores (docs/design.md, "Training the tiny model"): 16 prompts × group 8,
temperature 1.0, lr 2e-4, clip 0.2, advantages normalised by the group's std.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import torch
from pydantic import BaseModel, ConfigDict
from torch import nn

from openforge.core.records import Sample
from openforge.train.advantages import group_advantages, group_indices, groups_with_signal
from openforge.train.batching import TrainBatch, collate, micro_batches
from openforge.train.lora import trainable_parameters
from openforge.train.losses import behaviour_ratio, clipped_policy_loss, decoupled_weights, token_logprobs
from openforge.train.trainer_config import GRPOConfig


class GRPOMetrics(BaseModel):
    """What one step did. Fractions and KL are token-means over the trained tokens."""

    model_config = ConfigDict(extra="forbid")

    step: int
    updated: bool  # False when no group had signal: nothing to learn, no optimizer step
    loss: float = 0.0
    clip_fraction: float = 0.0
    clip_fraction_lower: float = 0.0
    approx_kl: float = 0.0
    mean_advantage: float = 0.0  # over the trained samples (≈ 0 by construction; a check, not a goal)
    mean_reward: float = 0.0  # over all samples given, signal or not
    groups_with_signal: int = 0
    groups_total: int = 0
    samples: int = 0  # trained (in groups with signal)
    tokens: int = 0  # trained tokens
    grad_norm: float = 0.0
    seconds: float = 0.0
    # Off-policy: the groups trained by staleness (versions between the oldest call and the policy updated:
    # {"0": n, "1": m, ...}), the groups dropped as older than `max_staleness`, and π_prox / π_behav over the
    # trained tokens (the policy before the update against the one that sampled; `truncated`: the share above
    # `importance_cap`, which the decoupled loss truncates and the synchronous loss does not use).
    staleness: dict[str, int] = {}
    stale_groups_dropped: int = 0
    behaviour_ratio_mean: float = 0.0
    behaviour_ratio_max: float = 0.0
    behaviour_ratio_truncated: float = 0.0


class GRPOTrainer:
    """`step(samples)` → `GRPOMetrics`. The optimizer is AdamW unless one is given (e.g. restored from a
    checkpoint: pass the optimizer whose state you loaded and `step_count`)."""

    def __init__(
        self,
        model: nn.Module,
        config: GRPOConfig | None = None,
        pad_id: int = 0,
        optimizer: torch.optim.Optimizer | None = None,
        step_count: int = 0,
    ):
        self.model = model
        self.config = config or GRPOConfig()
        self.pad_id = pad_id
        self.optimizer = optimizer or torch.optim.AdamW(
            trainable_parameters(model), lr=self.config.lr, weight_decay=self.config.weight_decay
        )
        self.step_count = step_count

    def step(self, samples: Sequence[Sample], policy_version: int | None = None) -> GRPOMetrics:
        """One update on `samples`. `policy_version`: the version of the policy being updated (the one serving
        now); groups sampled by a policy more than `max_staleness` versions older are dropped (None: keep all)."""
        started = time.perf_counter()
        cfg = self.config
        if not samples:
            raise ValueError("GRPO step on an empty list of samples")
        missing = [s.episode_id for s in samples if s.metadata.get("logprobs_missing")]
        if missing:
            raise ValueError(
                f"{len(missing)} samples have calls recorded without logprobs (e.g. episode "
                f"{missing[0]}); GRPO needs the behaviour logprobs from sampling time"
            )
        ages = group_staleness(samples, policy_version) if policy_version is not None else {}
        stale = {gid for gid, age in ages.items() if age > cfg.max_staleness}
        fresh = [s for s in samples if s.group_id not in stale]
        rewards = [s.reward for s in samples]
        group_ids = [s.group_id for s in fresh]
        signal = groups_with_signal([s.reward for s in fresh], group_ids)
        metrics = GRPOMetrics(
            step=self.step_count,
            updated=False,
            groups_total=len(group_indices(group_ids)),
            groups_with_signal=len(signal),
            mean_reward=sum(rewards) / len(rewards),
            staleness=histogram(age for gid, age in ages.items() if gid not in stale),
            stale_groups_dropped=len(stale),
        )
        kept = [s for s in fresh if s.group_id in signal and any(s.loss_mask)]
        if not kept:
            metrics.seconds = time.perf_counter() - started
            return metrics

        advantages = group_advantages([s.reward for s in kept], [s.group_id for s in kept], cfg.norm_by_std, cfg.eps)
        batch = collate(kept, pad_id=self.pad_id, advantages=advantages.tolist(), default_temperature=cfg.temperature)
        total = batch.num_tokens
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = clip_sum = lower_sum = kl_sum = 0.0
        parts = micro_batches(batch.attention_mask.sum(dim=1).tolist(), cfg.max_tokens_per_micro_batch)
        proximal = self._proximal_logprobs(batch, parts) if cfg.max_staleness > 0 else None
        before = torch.zeros_like(batch.old_logprobs)  # this policy's logprobs before the update (diagnostics)
        for rows in parts:
            mask = batch.loss_mask[rows]
            new_logprobs = token_logprobs(self.model, batch, rows)
            before[rows] = new_logprobs.detach()
            if proximal is None:  # synchronous: clipped against the behaviour logprobs, as always
                anchor, weights = batch.old_logprobs[rows], None
            else:  # decoupled: clipped against the proximal policy, weighted by the truncated behaviour ratio
                anchor = proximal[rows]
                weights = decoupled_weights(anchor, batch.old_logprobs[rows], cfg.importance_cap)
            result = clipped_policy_loss(
                new_logprobs,
                anchor,
                batch.advantages[rows],
                mask,
                cfg.clip_low,
                cfg.clip_high,
                cfg.clip_ratio_c,
                num_tokens=total,
                weights=weights,
            )
            result.loss.backward()
            # Diagnostics are means over this micro-batch's tokens: weight them back into batch means.
            share = float(mask.sum()) / total
            loss_sum += float(result.loss.detach())
            clip_sum += result.clip_fraction * share
            lower_sum += result.clip_fraction_lower * share
            kl_sum += result.approx_kl * share
        max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        self.optimizer.step()
        self.step_count += 1

        metrics.updated = True
        metrics.loss = loss_sum
        metrics.clip_fraction = clip_sum
        metrics.clip_fraction_lower = lower_sum
        metrics.approx_kl = kl_sum
        metrics.mean_advantage = float(advantages.mean())
        metrics.samples = len(kept)
        metrics.tokens = total
        metrics.grad_norm = float(grad_norm)
        ratio = behaviour_ratio(before, batch.old_logprobs, batch.loss_mask, cfg.importance_cap)
        metrics.behaviour_ratio_mean, metrics.behaviour_ratio_max = ratio.mean, ratio.max
        metrics.behaviour_ratio_truncated = ratio.truncated
        metrics.seconds = time.perf_counter() - started
        return metrics

    def _proximal_logprobs(self, batch: TrainBatch, parts: list[list[int]]) -> torch.Tensor:
        """π_prox: this policy's logprobs before the update, without gradient, for every row of `batch`."""
        proximal = torch.zeros_like(batch.old_logprobs)
        with torch.no_grad():
            for rows in parts:
                proximal[rows] = token_logprobs(self.model, batch, rows)
        return proximal


def group_staleness(samples: Sequence[Sample], policy_version: int) -> dict[str, int]:
    """group id → how many versions older than `policy_version` the oldest policy that sampled one of its
    trained tokens is (0 for a sample recorded without versions)."""
    ages: dict[str, int] = {}
    for s in samples:
        versions = [v for v, m in zip(s.policy_versions, s.loss_mask) if m]
        age = policy_version - min(versions) if versions else 0
        ages[s.group_id] = max(ages.get(s.group_id, 0), age)
    return ages


def histogram(values: Iterable[int]) -> dict[str, int]:
    """{"value": count}, in value order (JSON keys are strings)."""
    counts: dict[int, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return {str(k): counts[k] for k in sorted(counts)}
