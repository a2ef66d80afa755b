"""Batching and SFT: masks from lengths, loss only on trained tokens, the loss falls, micro-batches change
nothing but memory."""

from __future__ import annotations

import copy
import random

import pytest
import torch

from openforge.core.records import Sample
from openforge.train import SFTConfig, SFTTrainer, collate, micro_batches, sft_step
from openforge.train.losses import sft_loss, token_logprobs
from support.train import make_sample


@pytest.fixture()
def model(tiny_model):
    torch.manual_seed(0)
    return tiny_model.load_model()


def test_collate_builds_masks_from_lengths_even_when_pad_equals_eos():
    eos = 7
    a = Sample(
        token_ids=[1, 2, 3, eos],
        loss_mask=[0, 0, 1, 1],
        logprobs=[0, 0, -0.5, -0.25],
        reward=1.0,
        group_id="g",
        episode_id="a",
    )
    b = Sample(token_ids=[4, 5], loss_mask=[0, 1], logprobs=[0, -1.0], reward=0.0, group_id="g", episode_id="b")
    batch = collate([a, b], pad_id=eos, advantages=[2.0, -1.0])
    assert batch.input_ids.tolist() == [[1, 2, 3, eos], [4, 5, eos, eos]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1], [0, 1, 0, 0]]  # the sampled eos is trained, pads are not
    assert batch.old_logprobs.tolist() == [[0, 0, -0.5, -0.25], [0, -1.0, 0, 0]]
    assert batch.advantages.tolist() == [[0, 0, 2.0, 2.0], [0, -1.0, 0, 0]]
    assert batch.temperatures.tolist() == [1.0, 1.0] and batch.num_tokens == 3


def test_collate_refuses_what_cannot_be_trained():
    first = Sample(token_ids=[1, 2], loss_mask=[1, 1], logprobs=[0, 0], reward=0, group_id="g", episode_id="x")
    with pytest.raises(ValueError, match="first token"):
        collate([first])
    greedy = Sample(
        token_ids=[1, 2],
        loss_mask=[0, 1],
        logprobs=[0, 0],
        reward=0,
        group_id="g",
        episode_id="y",
        metadata={"temperature": 0.0},
    )
    with pytest.raises(ValueError, match="temperature"):
        collate([greedy])
    assert collate([greedy], sampling_temperatures=False).temperatures.tolist() == [1.0]  # SFT: fine


def test_micro_batches_respect_the_token_budget():
    lengths = [10, 50, 20, 50, 30, 5]
    groups = micro_batches(lengths, max_tokens=100)
    assert sorted(i for g in groups for i in g) == list(range(6))
    for g in groups:
        assert len(g) == 1 or len(g) * max(lengths[i] for i in g) <= 100
    assert micro_batches(lengths, None) == [[1, 3, 4, 2, 0, 5]]
    assert micro_batches([500], 100) == [[0]]  # too long for the budget: alone, not dropped


def test_logprobs_are_computed_at_the_sample_temperature(model):
    rng = random.Random(1)
    hot = make_sample(rng, "g", 0.0, temperature=2.0)
    batch = collate([hot, hot.model_copy(update={"metadata": {}})])
    with torch.no_grad():
        lp = token_logprobs(model, batch)
        logits = model(input_ids=batch.input_ids[:1]).logits[0, :-1]
    ids = batch.input_ids[0, 1:]
    expected = torch.log_softmax(logits / 2.0, dim=-1).gather(-1, ids[:, None]).squeeze(-1)
    assert torch.allclose(lp[0, 1:], expected, atol=1e-5)
    assert not torch.allclose(lp[0], lp[1], atol=1e-3)  # the row without a temperature used 1.0


def test_only_trained_tokens_contribute(model):
    """Changing tokens the loss does not train (after the last trained token, and the pad id) changes neither
    the loss nor the gradients; changing a trained token does."""
    rng = random.Random(2)
    base = make_sample(rng, "g", 1.0, length=30, prompt=6, tool_turn=(14, 18))
    base = base.model_copy(update={"loss_mask": base.loss_mask[:24] + [0] * 6})  # a tool result at the end

    def loss_and_grads(sample, pad_id=0):
        model.zero_grad(set_to_none=True)
        batch = collate([sample, make_sample(random.Random(3), "g", 1.0, length=12)], pad_id=pad_id)
        loss = sft_loss(token_logprobs(model, batch), batch.loss_mask)
        loss.backward()
        return float(loss.detach()), [p.grad.clone() for p in model.parameters()]

    loss0, grads0 = loss_and_grads(base)
    tail = base.model_copy(update={"token_ids": base.token_ids[:24] + [rng.randrange(10, 900) for _ in range(6)]})
    loss1, grads1 = loss_and_grads(tail, pad_id=5)
    assert loss1 == pytest.approx(loss0, abs=1e-6)
    assert all(torch.allclose(g0, g1, atol=1e-7) for g0, g1 in zip(grads0, grads1))
    trained = base.model_copy(
        update={"token_ids": base.token_ids[:10] + [(base.token_ids[10] + 1) % 900] + base.token_ids[11:]}
    )
    assert abs(loss_and_grads(trained)[0] - loss0) > 1e-4

    # And the value is the hand-computed token-mean over trained tokens only.
    batch = collate([base])
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids).logits[0]
    targets = [t for t in range(1, 30) if base.loss_mask[t]]
    manual = -sum(float(torch.log_softmax(logits[t - 1], -1)[base.token_ids[t]]) for t in targets) / len(targets)
    with torch.no_grad():
        assert float(sft_loss(token_logprobs(model, batch), batch.loss_mask)) == pytest.approx(manual, abs=1e-5)


def test_micro_batching_gives_the_same_step(model):
    rng = random.Random(4)
    samples = [make_sample(rng, "g", 1.0, length=rng.randrange(12, 30)) for _ in range(6)]
    other = copy.deepcopy(model)
    # SGD: the update is the gradient itself (Adam's first step is ~lr·sign(g), which magnifies rounding).
    opt_a = torch.optim.SGD(model.parameters(), lr=1.0)
    opt_b = torch.optim.SGD(other.parameters(), lr=1.0)
    loss_a = sft_step(model, opt_a, samples)
    loss_b = sft_step(other, opt_b, samples, max_tokens_per_micro_batch=40)
    assert loss_a == pytest.approx(loss_b, abs=1e-5)
    for pa, pb in zip(model.parameters(), other.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6)


def test_sft_loss_falls(model):
    rng = random.Random(5)
    samples = [make_sample(rng, "g", 1.0, length=32, prompt=8, tool_turn=(18, 22)) for _ in range(4)]
    trainer = SFTTrainer(model, SFTConfig(lr=3e-3, steps=20, batch_size=4, warmup_steps=0, schedule="constant"))
    losses = trainer.train(samples)
    assert len(losses) == 20 and trainer.step_count == 20
    assert losses[-1] < 0.5 * losses[0], losses


def test_learning_rate_warms_up_then_decays_to_zero_on_a_cosine(model):
    rng = random.Random(6)
    samples = [make_sample(rng, "g", 1.0, length=16, prompt=4) for _ in range(4)]
    trainer = SFTTrainer(model, SFTConfig(lr=1e-3, steps=10, batch_size=4, warmup_steps=4, schedule="cosine"))
    seen: list[float] = []
    trainer.train(samples, on_step=lambda step, loss: seen.append(trainer.optimizer.param_groups[0]["lr"]))
    assert seen[:4] == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3])
    assert seen[4] == pytest.approx(1e-3) and all(a > b for a, b in zip(seen[4:], seen[5:]))  # then decays
    assert seen[-1] < 0.1e-3 and trainer.lr_at(10, 10) == pytest.approx(0.0)
    constant = SFTTrainer(model, SFTConfig(lr=1e-3, steps=3, batch_size=4, warmup_steps=0, schedule="constant"))
    assert [constant.lr_at(s, 3) for s in range(3)] == [1e-3] * 3
