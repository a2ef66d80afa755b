"""Supervised fine-tuning on recorded trajectories: cross-entropy only on the tokens the policy produced
(loss mask 1) — the system prompt, the user's words and tool results are context, never targets.

    losses = SFTTrainer(model, SFTConfig(lr=1e-3, epochs=3, batch_size=16)).train(samples)

`sft_step` is one optimizer step on one batch; the trainer loops it over shuffled batches.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import nn

from openforge.core.records import Sample
from openforge.train.batching import collate, micro_batches
from openforge.train.lora import trainable_parameters
from openforge.train.losses import sft_loss, token_logprobs
from openforge.train.trainer_config import SFTConfig


def sft_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Sequence[Sample],
    pad_id: int = 0,
    max_grad_norm: float | None = 1.0,
    max_tokens_per_micro_batch: int | None = None,
) -> float:
    """One optimizer step of masked cross-entropy on `samples`; returns the loss (token-mean over the batch's
    trained tokens) before the step. Micro-batches change memory, not the result: each is divided by the
    whole batch's token count, so their gradients add up to the full batch's."""
    batch = collate(samples, pad_id=pad_id, sampling_temperatures=False)  # cross-entropy at temperature 1
    total = batch.num_tokens
    if total == 0:
        raise ValueError("SFT batch has no trained tokens (every loss mask is 0)")
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for rows in micro_batches(batch.attention_mask.sum(dim=1).tolist(), max_tokens_per_micro_batch):
        logprobs = token_logprobs(model, batch, rows)
        loss = sft_loss(logprobs, batch.loss_mask[rows], num_tokens=total)
        loss.backward()
        loss_sum += float(loss.detach())
    if max_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return loss_sum


class SFTTrainer:
    """AdamW over shuffled batches of samples. `losses` is the curve, one value per step."""

    def __init__(
        self, model: nn.Module, config: SFTConfig, pad_id: int = 0, optimizer: torch.optim.Optimizer | None = None
    ):
        self.model = model
        self.config = config
        self.pad_id = pad_id
        self.optimizer = optimizer or torch.optim.AdamW(
            trainable_parameters(model), lr=config.lr, weight_decay=config.weight_decay
        )
        self.step_count = 0
        self.losses: list[float] = []
        self.step_seconds: list[float] = []

    def total_steps(self, num_samples: int) -> int:
        if self.config.steps is not None:
            return self.config.steps
        assert self.config.epochs is not None  # SFTConfig holds exactly one of steps and epochs
        return -(-num_samples // self.config.batch_size) * self.config.epochs

    def lr_at(self, step: int, total: int) -> float:
        """The learning rate of optimizer step `step` (0-based) of `total`."""
        warmup = self.config.warmup_steps
        if step < warmup:
            return self.config.lr * (step + 1) / warmup
        if self.config.schedule == "cosine":
            progress = (step - warmup) / max(1, total - warmup)
            return self.config.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return self.config.lr

    def batches(self, samples: Sequence[Sample]) -> Iterator[list[Sample]]:
        """Shuffled batches: `epochs` passes, or batches until `steps` (reshuffling after each pass)."""
        rng = random.Random(self.config.seed)
        size = self.config.batch_size
        produced, epoch = 0, 0
        while True:
            order = list(range(len(samples)))
            rng.shuffle(order)
            for start in range(0, len(order), size):
                if self.config.steps is not None and produced >= self.config.steps:
                    return
                yield [samples[i] for i in order[start : start + size]]
                produced += 1
            epoch += 1
            if self.config.epochs is not None and epoch >= self.config.epochs:
                return

    def train(self, samples: Sequence[Sample], on_step: Callable[[int, float], object] | None = None) -> list[float]:
        """Train and return the loss curve. `on_step(step, loss)` is called after each step (progress bars)."""
        trainable = [s for s in samples if any(s.loss_mask)]
        if not trainable:
            raise ValueError(f"none of the {len(samples)} samples has a trained token")
        total = self.total_steps(len(trainable))
        for batch in self.batches(trainable):
            started = time.perf_counter()
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_at(self.step_count, total)
            loss = sft_step(
                self.model,
                self.optimizer,
                batch,
                self.pad_id,
                self.config.max_grad_norm,
                self.config.max_tokens_per_micro_batch,
            )
            self.step_seconds.append(time.perf_counter() - started)
            self.step_count += 1
            self.losses.append(loss)
            if on_step is not None:
                on_step(self.step_count, loss)
        return self.losses
