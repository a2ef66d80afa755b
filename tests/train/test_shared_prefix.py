"""The shared-prefix forward (`openforge.train.shared_prefix`): a batch whose rows start with the same untrained
tokens (a harness's constant prompt) runs that prefix once — with the same logprobs and the same gradients as
the plain forward pass over every row."""

from __future__ import annotations

import pytest
import torch

from openforge.models import ModelDir
from openforge.train.batching import collate
from openforge.train.losses import sft_loss, token_logprobs
from openforge.train.shared_prefix import (
    MIN_SHARED_PREFIX,
    prefix_groups,
    receptive_start,
    shared_prefix_length,
)
from support.inference import sliding_window_model_dir
from support.train import parameter_grads, prefix_samples


@pytest.mark.parametrize("window", [None, 16], ids=["full-attention", "sliding-window"])
def test_a_shared_prefix_gives_the_plain_forwards_logprobs_and_gradients(window, tiny_model_dir):
    """Behind a sliding window the positions no trained token can see are not computed at all: the trained
    positions' logprobs and every gradient are still the plain pass's over the whole sequence."""
    model = ModelDir(sliding_window_model_dir(window) if window else tiny_model_dir).load_model()
    model.train()
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(10, 900, (300,), generator=gen).tolist()
    # rows of different lengths (right padding), each with its own tokens after the prefix
    tails = [torch.randint(10, 900, (n,), generator=gen).tolist() for n in (9, 30, 17, 5)]
    batch = collate(prefix_samples(prefix, tails), pad_id=0)
    assert (
        shared_prefix_length(batch.input_ids, batch.attention_mask, batch.loss_mask) == 300
    )  # the tails differ from their first token
    results = {}
    for share in (False, True):
        model.zero_grad(set_to_none=True)
        logprobs = token_logprobs(model, batch, share_prefix=share)
        sft_loss(logprobs, batch.loss_mask).backward()
        results[share] = (logprobs.detach(), parameter_grads(model))
    (plain, plain_grads), (shared, shared_grads) = results[False], results[True]
    # behind a window only the positions the trained tokens can see are computed (the rest are 0, never trained)
    start = receptive_start(model.config, batch.loss_mask)
    assert start == (0 if window is None else 302 - 1 - 4 * window)
    first_trained = 302
    exact = first_trained if window else 1
    real = batch.attention_mask.bool()
    real[:, :exact] = False
    assert torch.allclose(plain[real], shared[real], atol=1e-4), (plain - shared).abs().max()
    assert not shared[:, :exact].any()
    assert len(plain_grads) == len(shared_grads) > 0
    for a, b in zip(plain_grads, shared_grads):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-3), (a - b).abs().max()


def test_only_an_untrained_common_prefix_is_shared(tiny_model_dir):
    prefix = list(range(10, 10 + MIN_SHARED_PREFIX + 6))
    batch = collate(prefix_samples(prefix, [[1, 2, 3, 4], [1, 2, 5, 6]], trained_from=0), pad_id=0)
    # the rows agree on two more tokens, but those are trained: they are not part of the shared prefix
    assert shared_prefix_length(batch.input_ids, batch.attention_mask, batch.loss_mask) == len(prefix)
    one = collate(prefix_samples(prefix, [[1, 2, 3]]), pad_id=0)
    assert shared_prefix_length(one.input_ids, one.attention_mask, one.loss_mask) == 0  # nothing to share
    different = collate(prefix_samples(prefix, [[1, 2, 3]]) + prefix_samples([7, *prefix[1:]], [[1, 2, 3]]), pad_id=0)
    assert shared_prefix_length(different.input_ids, different.attention_mask, different.loss_mask) == 0


def test_a_batch_mixing_prompts_shares_each_prompt_within_its_rows(tiny_model_dir):
    """Three harnesses' demonstrations in one batch (the mixed condition's SFT): two long prompts and a short
    one, interleaved. Each long prompt runs once — far fewer positions through the model than the plain pass
    over rows padded to the longest — with the plain pass's logprobs and gradients, in the batch's order."""
    model = ModelDir(tiny_model_dir).load_model()
    model.train()
    gen = torch.Generator().manual_seed(1)
    claude, codex = (torch.randint(10, 900, (n,), generator=gen).tolist() for n in (200, 400))
    react = torch.randint(10, 900, (20,), generator=gen).tolist()
    tails = [torch.randint(10, 900, (n,), generator=gen).tolist() for n in (9, 30, 17, 5, 12, 8)]
    prompts = [claude, codex, react, codex, claude, react]
    samples = [s for prompt, tail in zip(prompts, tails) for s in prefix_samples(prompt, [tail])]
    batch = collate(samples, pad_id=0)
    assert shared_prefix_length(batch.input_ids, batch.attention_mask, batch.loss_mask) == 0  # nothing shared by all
    assert prefix_groups(batch.input_ids, batch.attention_mask, batch.loss_mask) == [[0, 4], [1, 3], [2, 5]]
    positions: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: positions.append(kwargs["input_ids"].numel()), with_kwargs=True
    )
    results = {}
    for share in (False, True):
        model.zero_grad(set_to_none=True)
        positions.clear()
        logprobs = token_logprobs(model, batch, share_prefix=share)
        sft_loss(logprobs, batch.loss_mask).backward()
        results[share] = (logprobs.detach(), parameter_grads(model), sum(positions))
    hook.remove()
    (plain, plain_grads, plain_positions), (shared, shared_grads, shared_positions) = results[False], results[True]
    assert shared_positions < plain_positions / 3, (shared_positions, plain_positions)
    real = batch.attention_mask.bool()
    real[:, 0] = False
    assert torch.allclose(plain[real], shared[real], atol=1e-4), (plain - shared).abs().max()
    for a, b in zip(plain_grads, shared_grads):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-3), (a - b).abs().max()
