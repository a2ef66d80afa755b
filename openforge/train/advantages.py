"""GRPO outcome advantages: each sample's reward against the other samples of its group.

    advantage_i = (r_i − mean(group)) / (std(group) + eps)      (norm_by_std=True, the original GRPO)
    advantage_i =  r_i − mean(group)                            (norm_by_std=False, Dr. GRPO)

This is veRL 0.9.1's `compute_grpo_outcome_advantage` (verl/trainer/ppo/core_algos.py), including its details:
the std is torch's default, the *unbiased* one (divides by n − 1); a group of one sample gets mean 0 and
std 1 (its advantage is its reward / (1 + eps)); arithmetic in float32. One deliberate difference: a group
whose rewards are all equal gets exactly 0 (veRL gets 0 too, up to float rounding of the mean), since such a
group carries no signal — the trainer drops those groups anyway (`groups_with_signal`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import torch


def group_indices(group_ids: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    """group id → indices of its samples, in first-seen order."""
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, gid in enumerate(group_ids):
        groups[gid].append(i)
    return dict(groups)


def groups_with_signal(rewards: Sequence[float], group_ids: Sequence[Hashable]) -> set[Hashable]:
    """Groups with at least two different rewards. A group whose samples all scored the same (or that has one
    sample) has all-zero advantages: it trains nothing and only dilutes the token mean."""
    return {gid for gid, idx in group_indices(group_ids).items() if len({float(rewards[i]) for i in idx}) > 1}


def group_advantages(
    rewards: Sequence[float] | torch.Tensor,
    group_ids: Sequence[Hashable],
    norm_by_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """One advantage per sample (shape (N,), float32); broadcast it over the sample's trained tokens."""
    scores = torch.as_tensor(rewards, dtype=torch.float32).clone().reshape(-1)
    if scores.shape[0] != len(group_ids):
        raise ValueError(f"{scores.shape[0]} rewards for {len(group_ids)} group ids")
    if not torch.isfinite(scores).all():
        raise ValueError("rewards must be finite numbers")
    out = torch.zeros_like(scores)
    for idx in group_indices(group_ids).values():
        group = scores[idx]
        if len(idx) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)  # veRL's convention for a lone sample
        elif bool((group == group[0]).all()):
            continue  # all equal: exactly 0, no signal
        else:
            mean, std = torch.mean(group), torch.std(group)  # torch.std: unbiased, as veRL
        centred = group - mean
        out[idx] = centred / (std + eps) if norm_by_std else centred
    return out
