"""One forward pass over the prefix every sample of a micro-batch shares.

A harness's prompt is mostly constant: Claude Code's first call carries ~3,300 tokens of system prompt and tool
schemas before the task, Codex's ~10,800, identical in every episode. In a batch of B such samples the plain
forward pass computes those positions B times; causal attention makes them identical in every row, so they are
computed once here (one row), their keys and values repeated to B rows, and only the rest of each sample — where
the loss is — runs B times. Exact, not an approximation: the rows' hidden states, logits and (autograd summing
over the repeat) gradients are those of the plain pass, up to float rounding (tests/train/test_shared_prefix.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn
from transformers import DynamicCache

from openforge.inference.engine import cache_argument
from openforge.train.vocab_blocks import OutputHead

__all__ = ["MIN_SHARED_PREFIX", "prefix_groups", "receptive_start", "shared_prefix_length", "shared_prefix_logprobs"]

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


def receptive_start(config: object, loss_mask: torch.Tensor) -> int:
    """The first position any trained token can depend on. With sliding-window attention in every layer a
    position sees at most `window` positions back per layer, so a trained token depends only on the
    layers × window tokens before it: the positions before that never reach the loss and need no compute (Codex's
    1,800-token prompt behind a 96-token window: three quarters of it). 0 when any layer attends to everything."""
    window, layer_types = getattr(config, "sliding_window", None), getattr(config, "layer_types", None)
    if not window or not layer_types or any(kind != "sliding_attention" for kind in layer_types):
        return 0
    trained = loss_mask.bool().any(0).nonzero()
    if not len(trained):
        return 0
    # the first trained token is predicted from the position before it, which sees layers × window back
    return max(0, int(trained[0]) - 1 - len(layer_types) * window)


def prefix_groups(input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor) -> list[list[int]]:
    """The rows grouped by the prompt they start with, so each group's prefix can be shared: rows whose first
    MIN_SHARED_PREFIX tokens agree (real, untrained) form a group; every other row (a short prompt, or one no
    other row starts with) joins one last group. A batch that mixes harnesses — react's, Claude Code's and
    Codex's demonstrations — shares nothing as a whole but each harness's prompt within its group; it also pads
    each group only to its own longest row. One group when the batch is all one prompt (or all different)."""
    head = input_ids.shape[1] >= MIN_SHARED_PREFIX
    by_key: dict[tuple[int, ...], list[int]] = {}
    rest: list[int] = []
    for row in range(input_ids.shape[0]):
        if head and attention_mask[row, :MIN_SHARED_PREFIX].all() and not loss_mask[row, :MIN_SHARED_PREFIX].any():
            by_key.setdefault(tuple(input_ids[row, :MIN_SHARED_PREFIX].tolist()), []).append(row)
        else:
            rest.append(row)
    groups = [rows for rows in by_key.values() if len(rows) > 1]
    rest += [row for rows in by_key.values() if len(rows) == 1 for row in rows]
    return groups + [sorted(rest)] if rest else groups


@contextmanager
def activations_kept(model: nn.Module) -> Iterator[None]:
    """Activation checkpointing paused: a checkpointed layer runs without its cache (transformers drops it), and
    the passes here need the prefix's keys and values."""
    paused = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    for module in paused:
        setattr(module, "gradient_checkpointing", False)  # noqa: B010 (a module attribute, typed loosely)
    try:
        yield
    finally:
        for module in paused:
            setattr(module, "gradient_checkpointing", True)  # noqa: B010


def shared_prefix_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperatures: torch.Tensor,
    prefix: int,
    start: int = 0,
) -> torch.Tensor:
    """log p(token t | tokens < t) for t = 1 … width − 1 (shape (B, width − 1)), the first `prefix` positions
    (shared by every row) computed once. `input_ids` and `attention_mask` are cut to the batch's longest row;
    `start`: they begin at that position of the samples (`receptive_start`), which the positions keep."""
    rows, width = input_ids.shape
    positions = torch.arange(start, start + width, device=input_ids.device)[None]
    output = OutputHead(model, rows, width - prefix)  # logits, or hidden states when the logits would be large
    cache, keyword = DynamicCache(), cache_argument(output.module)  # filled in place by the prefix's pass
    with activations_kept(model):
        head = output.forward(
            input_ids=input_ids[:1, :prefix],
            attention_mask=attention_mask[:1, :prefix],
            use_cache=True,
            position_ids=positions[:, :prefix],
            **{keyword: cache},
        )
        cache.batch_repeat_interleave(rows)
        tail = output.forward(
            input_ids=input_ids[:, prefix:width],
            attention_mask=attention_mask,
            use_cache=True,
            position_ids=positions[:, prefix:].expand(rows, -1),
            **{keyword: cache},
        )
    # inside the prefix nothing is trained (shared_prefix_length): one row per distinct temperature, no graph
    with torch.no_grad():
        inside = torch.empty((rows, prefix - 1), dtype=torch.float32)
        for t in temperatures.unique():
            same = temperatures == t
            inside[same] = output.picked(head[:, : prefix - 1], input_ids[:1, 1:prefix], t[None])
    # the prefix's last outputs predict each row's first own token; the tail's last predict nothing
    boundary = head[:, prefix - 1 : prefix].expand(rows, -1, -1)
    after = torch.cat([boundary, tail[:, :-1]], dim=1)
    return torch.cat([inside, output.picked(after, input_ids[:, prefix:width], temperatures)], dim=1)
