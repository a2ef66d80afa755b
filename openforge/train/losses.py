"""Losses on padded (batch, time) tensors: per-token logprobs from a forward pass, masked cross-entropy (SFT)
and the clipped policy-gradient surrogate (GRPO).

Every loss is a *token mean* over the tokens whose mask is 1 — veRL's `loss_agg_mode="token-mean"`: each
trained token weighs the same, however long its sample. `num_tokens` lets a caller that splits a batch into
micro-batches divide every micro-batch by the whole batch's token count, so the summed gradients equal those
of one pass over the whole batch.

`clipped_policy_loss` is veRL 0.9.1's `compute_policy_loss_vanilla` (verl/trainer/ppo/core_algos.py), term for
term: log-ratio clamped to ±20, PPO clip with separate low/high ranges, and dual-clip (a bound of
`clip_ratio_c` × |A| on the loss of negative-advantage tokens). tests/train/test_verl_agreement.py holds them
equal on the same batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from openforge.train.batching import TrainBatch
from openforge.train.shared_prefix import (
    MIN_SHARED_PREFIX,
    prefix_groups,
    receptive_start,
    shared_prefix_length,
    shared_prefix_logprobs,
)
from openforge.train.vocab_blocks import OutputHead


def token_logprobs(
    model: nn.Module, batch: TrainBatch, rows: list[int] | None = None, *, share_prefix: bool = True
) -> torch.Tensor:
    """log p(token t | tokens < t) under `model` at each sample's temperature, aligned with `input_ids`
    (column 0, which nothing predicts, is 0). Shape (B, T), float32, with grad if the model has it.

    The temperature matters: the embedded backend records log_softmax(logits / temperature) at the sampled
    token, so the new logprobs must be computed the same way or every ratio is off from the first step.

    The leading tokens every row shares (a harness's constant system prompt and tools, untrained) run through
    the model once, not once per row (`shared_prefix.py`; `share_prefix=False` turns it off); a batch that mixes
    prompts (several harnesses) runs one such pass per prompt (`prefix_groups`). Behind sliding-window attention
    only the positions the trained tokens can see run at all (`receptive_start`)."""
    rows = list(range(batch.input_ids.shape[0])) if rows is None else list(rows)
    if not share_prefix:
        return _rows_logprobs(model, batch, rows, share_prefix=False)
    groups = prefix_groups(batch.input_ids[rows], batch.attention_mask[rows], batch.loss_mask[rows])
    if len(groups) == 1:
        return _rows_logprobs(model, batch, rows, share_prefix=True)
    parts = [_rows_logprobs(model, batch, [rows[i] for i in group], share_prefix=True) for group in groups]
    order = torch.tensor([i for group in groups for i in group], device=batch.input_ids.device)
    return torch.cat(parts)[torch.argsort(order)]  # back in the order of `rows`


def _rows_logprobs(model: nn.Module, batch: TrainBatch, rows: list[int], *, share_prefix: bool) -> torch.Tensor:
    """token_logprobs of `rows` in one forward pass (two when they share a long enough prefix), from the first
    position a trained token can depend on (`receptive_start`); after such a cut the positions before the first
    trained token are 0 (never trained)."""
    input_ids, attention_mask = batch.input_ids[rows], batch.attention_mask[rows]
    temperatures, loss_mask = batch.temperatures[rows], batch.loss_mask[rows]
    width = int(attention_mask.sum(dim=1).max().item())
    start = receptive_start(model.config, loss_mask[:, :width]) if share_prefix else 0
    input_ids, attention_mask = input_ids[:, start:width], attention_mask[:, start:width]
    prefix = shared_prefix_length(input_ids, attention_mask, loss_mask[:, start:width]) if share_prefix else 0
    if prefix >= MIN_SHARED_PREFIX:  # a harness's constant prompt: computed once, not once per row
        picked = shared_prefix_logprobs(model, input_ids, attention_mask, temperatures, prefix, start)
    else:
        positions = torch.arange(start, width, device=input_ids.device)[None].expand(len(rows), -1)
        head = OutputHead(model, len(rows), width - start)
        outputs = head.forward(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, use_cache=False
        )
        picked = head.picked(outputs[:, :-1], input_ids[:, 1:], temperatures)
    first = start + 1  # the first position computed from its whole context
    if start:  # after a cut, from the first trained token on (before it the context is cut short)
        first = int(loss_mask[:, :width].bool().any(0).nonzero()[0])
        picked = picked[:, first - start - 1 :]
    # zero column 0 (nothing predicts it), the positions not computed exactly (never trained) and the pad tail
    return torch.nn.functional.pad(picked, (first, batch.input_ids.shape[1] - width))


def masked_sum(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # where(), not values * mask: a NaN or inf on a masked-out position must not leak into the sum.
    return torch.where(mask.bool(), values, torch.zeros_like(values)).sum()


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over mask-1 positions; 0 when the mask is empty (veRL's masked_mean: the same 1e-8 guard)."""
    return masked_sum(values, mask) / (mask.sum() + 1e-8)


def token_mean(values: torch.Tensor, mask: torch.Tensor, num_tokens: int | float | None = None) -> torch.Tensor:
    """Sum over mask-1 positions divided by `num_tokens` (default: this mask's count)."""
    denominator = mask.sum() if num_tokens is None else torch.as_tensor(float(num_tokens))
    if float(denominator) <= 0:
        raise ValueError("token-mean over a batch with no trained tokens (every loss mask is 0)")
    return masked_sum(values, mask) / denominator


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor, num_tokens: int | float | None = None) -> torch.Tensor:
    """Cross-entropy on the trained tokens: the token-mean of -log p(token)."""
    return token_mean(-logprobs, mask, num_tokens)


@dataclass
class PolicyLoss:
    """The surrogate loss (to call .backward() on) and its diagnostics, each a masked mean over this call's
    tokens: `clip_fraction` (the clipped term was the larger loss: veRL's `actor/pg_clipfrac`),
    `clip_fraction_lower` (dual-clip bound applied: `actor/pg_clipfrac_lower`), `approx_kl` (mean of
    old − new logprob: `actor/ppo_kl`)."""

    loss: torch.Tensor
    clip_fraction: float
    clip_fraction_lower: float
    approx_kl: float


def clipped_policy_loss(
    new_logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_ratio_c: float | None = 3.0,
    num_tokens: int | float | None = None,
    weights: torch.Tensor | None = None,
) -> PolicyLoss:
    """PPO's clipped surrogate, token-mean over `mask`:

        ratio = exp(clamp(new − old, −20, 20))
        loss_t = max(−A·ratio, −A·clip(ratio, 1 − clip_low, 1 + clip_high))
        if A < 0 (dual clip): loss_t = min(loss_t, −A·clip_ratio_c)
        loss_t = w_t · loss_t                     (with `weights`: decoupled PPO's importance weight)

    All arguments (B, T). `clip_ratio_c=None` turns dual clip off. `weights` (detached, (B, T)): each token's
    loss times its weight — `decoupled_weights` for off-policy samples, where `old` is the proximal policy;
    None leaves the loss exactly as it was (no multiplication at all)."""
    log_ratio = torch.clamp(new_logprobs - old_logprobs, min=-20.0, max=20.0)  # exp() of a wild ratio overflows
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    losses = torch.maximum(unclipped, clipped)
    clip_fraction = masked_mean(torch.gt(clipped, unclipped).float(), mask)
    lower_fraction = torch.zeros(())
    if clip_ratio_c is not None:
        if clip_ratio_c <= 1.0:
            raise ValueError(f"clip_ratio_c (dual-clip bound) must be > 1, got {clip_ratio_c}")
        bound = -advantages * clip_ratio_c
        lower_fraction = masked_mean(torch.gt(losses, bound).float() * (advantages < 0).float(), mask)
        # Dual clip: a token with A < 0 whose ratio exploded cannot dominate the batch.
        losses = torch.where(advantages < 0, torch.minimum(bound, losses), losses)
    if weights is not None:
        losses = losses * weights
    return PolicyLoss(
        loss=token_mean(losses, mask, num_tokens),
        clip_fraction=float(clip_fraction),
        clip_fraction_lower=float(lower_fraction),
        approx_kl=float(masked_mean(-log_ratio.detach(), mask)),
    )


@dataclass
class BehaviourRatio:
    """π_prox / π_behav over the trained tokens (the policy the update starts from against the one that sampled):
    mean, max, and the share of tokens above the truncation cap."""

    mean: float
    max: float
    truncated: float


def decoupled_weights(proximal_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, cap: float) -> torch.Tensor:
    """Decoupled PPO's truncated importance weight per token: min(π_prox / π_behav, cap), no gradient
    (docs/design.md, "Asynchronous GRPO")."""
    log_ratio = torch.clamp(proximal_logprobs.detach() - behaviour_logprobs, min=-20.0, max=20.0)
    return torch.clamp(torch.exp(log_ratio), max=cap)


def behaviour_ratio(
    proximal_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor, cap: float
) -> BehaviourRatio:
    ratio = torch.exp(torch.clamp(proximal_logprobs.detach() - behaviour_logprobs, min=-20.0, max=20.0))
    on = mask.bool()
    if not bool(on.any()):
        return BehaviourRatio(0.0, 0.0, 0.0)
    return BehaviourRatio(
        mean=float(ratio[on].mean()), max=float(ratio[on].max()), truncated=float((ratio[on] > cap).float().mean())
    )
