"""One forward pass over the prefix every sample of a micro-batch shares.

A harness's prompt is mostly constant: Claude Code's first call carries ~3,300 tokens of system prompt and tool
schemas before the task, Codex's ~10,800, identical in every episode. In a batch of B such samples the plain
forward pass computes those positions B times; causal attention makes them identical in every row, so they are
computed once here (one row), their keys and values repeated to B rows, and only the rest of each sample — where
the loss is — runs B times. Exact, not an approximation: the rows' hidden states, logits and (autograd summing
over the repeat) gradients are those of the plain pass, up to float rounding (tests/train/test_shared_prefix.py).
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from openforge.inference.engine import cache_argument

__all__ = ["MIN_SHARED_PREFIX", "shared_prefix_length", "shared_prefix_logprobs"]

# Shorter shared prefixes keep the plain single pass (a second forward call for a few tokens is not worth it;
# the quickstart's prompts, about 40 tokens, never take this path).
MIN_SHARED_PREFIX = 64


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor) -> int:
    """How many leading positions every row shares: the same token, a real one (not padding), trained in no
    row. 0 for a single row."""
    if input_ids.shape[0] < 2:
        return 0
    shared = (input_ids == input_ids[:1]).all(0) & attention_mask.bool().all(0) & ~loss_mask.bool().any(0)
    return int(shared.int().cumprod(0).sum())


def _picked(logits: torch.Tensor, targets: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits / T) at `targets`; logits (B, N, V), targets (B, N), temperatures (B,)."""
    scaled = logits.float() / temperatures[:, None, None]
    return torch.log_softmax(scaled, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def shared_prefix_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                           temperatures: torch.Tensor, prefix: int) -> torch.Tensor:
    """log p(token t | tokens < t) for t = 1 … width − 1 (shape (B, width − 1)), the first `prefix` positions
    (shared by every row) computed once. `input_ids` and `attention_mask` are cut to the batch's longest row."""
    rows, width = input_ids.shape
    cache, keyword = DynamicCache(), cache_argument(model)  # filled in place by the prefix's pass
    head = model(input_ids=input_ids[:1, :prefix], attention_mask=attention_mask[:1, :prefix], use_cache=True,
                 **{keyword: cache})
    cache.batch_repeat_interleave(rows)
    tail = model(input_ids=input_ids[:, prefix:width], attention_mask=attention_mask, use_cache=True,
                 **{keyword: cache}).logits
    # inside the prefix nothing is trained (shared_prefix_length): one row per distinct temperature, no graph
    with torch.no_grad():
        inside = torch.empty((rows, prefix - 1), dtype=torch.float32)
        for t in temperatures.unique():
            same = temperatures == t
            inside[same] = _picked(head.logits[:, :prefix - 1], input_ids[:1, 1:prefix], t[None])
    # the prefix's last logits predict each row's first own token; the tail's last predict nothing
    boundary = head.logits[:, prefix - 1:prefix].expand(rows, -1, -1)
    after = torch.cat([boundary, tail[:, :-1]], dim=1)
    return torch.cat([inside, _picked(after, input_ids[:, prefix:width], temperatures)], dim=1)
