"""Log-probabilities a block of positions at a time (`openforge.train.vocab_blocks`): past the logits budget the
output layer and the log-softmax run block by block from the decoder's hidden states — with the plain path's
values and gradients, through the plain forward pass and the shared-prefix one, for a full model and a LoRA
model alike."""

from __future__ import annotations

import pytest
import torch

from openforge.models import ModelDir
from openforge.train import vocab_blocks
from openforge.train.batching import collate
from openforge.train.lora import trainable_model
from openforge.train.losses import sft_loss, token_logprobs
from openforge.train.trainer_config import LoRASettings
from openforge.train.vocab_blocks import OutputHead
from support.train import parameter_grads, prefix_samples


def _logprobs_and_grads(model, batch, share: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    logprobs = token_logprobs(model, batch, share_prefix=share)
    sft_loss(logprobs, batch.loss_mask).backward()
    return logprobs.detach(), parameter_grads(model)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("share", [False, True], ids=["plain-pass", "shared-prefix"])
def test_blocks_give_the_plain_logprobs_and_gradients(share, lora, tiny_model_dir, monkeypatch):
    model = (
        trainable_model(tiny_model_dir, LoRASettings(rank=4, alpha=8, target_modules=["q_proj", "down_proj"]))
        if lora
        else ModelDir(tiny_model_dir).load_model()
    )
    model.train()
    gen = torch.Generator().manual_seed(1)
    prefix = torch.randint(10, 900, (80,), generator=gen).tolist()
    tails = [torch.randint(10, 900, (n,), generator=gen).tolist() for n in (12, 33, 20)]
    batch = collate(prefix_samples(prefix, tails), pad_id=0)

    plain, plain_grads = _logprobs_and_grads(model, batch, share)
    assert not OutputHead(model, 3, 113).blocked  # the tiny model's vocabulary never reaches the budget
    # now every pass is over the budget, in blocks of a few positions
    monkeypatch.setattr(vocab_blocks, "LOGITS_BUDGET", 0)
    monkeypatch.setattr(vocab_blocks, "BLOCK_BYTES", 3 * model.config.vocab_size * 4 * 7)
    head = OutputHead(model, 3, 113)
    assert head.blocked and head.block == 7
    blocked, blocked_grads = _logprobs_and_grads(model, batch, share)

    assert torch.allclose(plain, blocked, atol=1e-5), (plain - blocked).abs().max()
    assert len(plain_grads) == len(blocked_grads) > 0
    for a, b in zip(plain_grads, blocked_grads):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4), (a - b).abs().max()


def test_an_architecture_with_more_than_a_plain_output_layer_keeps_the_whole_logits(tiny_model_dir, monkeypatch):
    """Soft-capping or logit scaling after the output layer would be skipped by the split: such models (any
    model_type not known to be plain) always take the plain path."""
    model = ModelDir(tiny_model_dir).load_model()
    monkeypatch.setattr(vocab_blocks, "LOGITS_BUDGET", 0)
    assert OutputHead(model, 8, 400).blocked
    monkeypatch.setattr(model.config, "model_type", "gemma2")
    assert not OutputHead(model, 8, 400).blocked
