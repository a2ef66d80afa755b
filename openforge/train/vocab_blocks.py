"""Token log-probabilities without the whole (rows, positions, vocabulary) logits tensor.

A real model's vocabulary makes its logits the largest tensors of a training step: SmolLM2-135M's 49,152 tokens
turn 8 × 400 positions into 630 MB of float32 logits, as much again for their log-softmax, and the same twice
more in the backward pass — more than its 30 layers' activations. Past `LOGITS_BUDGET` bytes the model's
decoder runs alone (its hidden states are 85× smaller than the logits) and the output layer and the
log-softmax run a block of positions at a time under activation checkpointing: one block's logits exist at a
time, and the backward pass recomputes each block's (one matrix product per block, a few per cent of the
step's compute). Exact: the values and gradients of the plain path, up to float rounding
(tests/train/test_vocab_blocks.py).

Only for architectures whose logits are the output layer of the last hidden state and nothing more
(`PLAIN_HEAD_TYPES`): Gemma's soft-capping or Granite's logit scaling would be skipped by the split, so those
keep the plain path. The tiny model's ~1,000-token vocabulary never reaches the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["LOGITS_BUDGET", "PLAIN_HEAD_TYPES", "OutputHead", "picked_logprobs"]

#: Logits above this many bytes (float32) are computed a block of positions at a time.
LOGITS_BUDGET = 256 << 20
#: One block's logits, in bytes.
BLOCK_BYTES = 64 << 20
#: model_type values whose logits are exactly `lm_head(last_hidden_state)`.
PLAIN_HEAD_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3", "smollm3"})


def picked_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits / T) at `targets`; logits (B, N, V), targets (B, N), temperatures (B,)."""
    scaled = logits.float() / temperatures[:, None, None]
    return torch.log_softmax(scaled, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


class OutputHead:
    """How one forward pass's outputs become log-probabilities: `forward` returns the model's logits, or — past
    the budget — its decoder's hidden states; `picked` turns a slice of either into log p(target)."""

    def __init__(self, model: nn.Module, rows: int, positions: int):
        self.model = model
        self.decoder: nn.Module | None = None
        self.head: nn.Module | None = None
        config = getattr(model, "config", None)
        vocabulary = int(getattr(config, "vocab_size", 0) or 0)
        plain_head = getattr(config, "model_type", None) in PLAIN_HEAD_TYPES
        if rows * positions * vocabulary * 4 > LOGITS_BUDGET and plain_head:
            self.decoder, self.head = model.get_decoder(), model.get_output_embeddings()  # type: ignore[operator]
            self.block = max(1, BLOCK_BYTES // max(1, rows * vocabulary * 4))

    @property
    def blocked(self) -> bool:
        return self.head is not None

    @property
    def module(self) -> nn.Module:
        """What `forward` calls: the decoder when blocked, else the whole model (for its cache keyword)."""
        return self.decoder if self.decoder is not None else self.model

    def forward(self, **inputs: Any) -> torch.Tensor:
        if self.decoder is not None:
            return self.decoder(**inputs).last_hidden_state
        return self.module(**inputs).logits

    def picked(self, outputs: torch.Tensor, targets: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
        """log p(targets) from `forward`'s outputs at the positions predicting them (B, N, ·) → (B, N)."""
        if self.head is None:
            return picked_logprobs(outputs, targets, temperatures)
        head = self.head
        checkpointed = torch.is_grad_enabled() and outputs.requires_grad

        def block(hidden: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
            return picked_logprobs(head(hidden), wanted, temperatures)

        run: Callable[..., torch.Tensor] = block
        if checkpointed:  # keep no block's logits for the backward pass: recompute them there

            def run(hidden: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
                return checkpoint(block, hidden, wanted, use_reentrant=False)

        starts = range(0, outputs.shape[1], self.block)
        parts = [run(outputs[:, s : s + self.block], targets[:, s : s + self.block]) for s in starts]
        return torch.cat(parts, dim=1) if parts else outputs.new_zeros(targets.shape, dtype=torch.float32)
