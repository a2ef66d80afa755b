"""Activation checkpointing (`activation_checkpointing: true`): each decoder layer recomputes its activations in
the backward pass — with the same log-probabilities and gradients, in the plain pass and in the shared-prefix
pass (which pauses it: a checkpointed layer would run without the prefix's cache)."""

from __future__ import annotations

import pytest
import torch

from openforge.train.batching import collate
from openforge.train.lora import trainable_model
from openforge.train.losses import sft_loss, token_logprobs
from openforge.train.trainer_config import LoRASettings
from support.train import parameter_grads, prefix_samples


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("share", [False, True], ids=["plain-pass", "shared-prefix"])
def test_checkpointed_layers_give_the_same_logprobs_and_gradients(share, lora, tiny_model_dir):
    gen = torch.Generator().manual_seed(2)
    prefix = torch.randint(10, 900, (80,), generator=gen).tolist()
    tails = [torch.randint(10, 900, (n,), generator=gen).tolist() for n in (12, 33, 20)]
    batch = collate(prefix_samples(prefix, tails), pad_id=0)
    settings = LoRASettings(rank=4, alpha=8, target_modules=["q_proj", "down_proj"]) if lora else None
    results = []
    for checkpointed in (False, True):
        torch.manual_seed(0)  # the same fresh adapter both times
        model = trainable_model(tiny_model_dir, settings, activation_checkpointing=checkpointed)
        model.train()
        layers = [m for m in model.modules() if getattr(m, "gradient_checkpointing", None) is not None]
        assert any(m.gradient_checkpointing for m in layers) == checkpointed
        logprobs = token_logprobs(model, batch, share_prefix=share)
        sft_loss(logprobs, batch.loss_mask).backward()
        results.append((logprobs.detach(), parameter_grads(model)))
        assert any(m.gradient_checkpointing for m in layers) == checkpointed  # the shared pass resumed it
    (plain, plain_grads), (checked, checked_grads) = results
    assert torch.allclose(plain, checked, atol=1e-5), (plain - checked).abs().max()
    assert len(plain_grads) == len(checked_grads) > 0
    for a, b in zip(plain_grads, checked_grads):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4), (a - b).abs().max()
