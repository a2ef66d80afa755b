"""Checkpoints: a servable model directory with the same logits, and a resume that continues exactly."""

from __future__ import annotations

import random

import pytest
import torch

from openforge.models import ModelDir
from openforge.train import CheckpointError, SFTConfig, SFTTrainer, load_checkpoint, read_trainer_state, save_checkpoint
from support.train import make_sample

SERVABLE = {
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "generation_config.json",
}


def _train(model, samples, steps, optimizer=None):
    trainer = SFTTrainer(
        model, SFTConfig(lr=2e-3, steps=steps, batch_size=4, warmup_steps=0, schedule="constant"), optimizer=optimizer
    )
    return trainer, trainer.train(samples)


def test_checkpoint_round_trip_and_resume(tmp_path, tiny_model):
    rng = random.Random(30)
    samples = [make_sample(rng, "g", 1.0, length=20) for _ in range(4)]
    torch.manual_seed(0)
    model = tiny_model.load_model()
    trainer, _ = _train(model, samples, steps=2)

    out = save_checkpoint(
        model, tiny_model, tmp_path / "ckpt" / "step-2", optimizer=trainer.optimizer, step=2, extra={"run": "test"}
    )
    rng_after_save = torch.rand(3)
    assert SERVABLE <= {p.name for p in out.iterdir()}
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temporary left behind

    # A model directory in its own right: same tokenizer and template, same logits.
    served = ModelDir(out)
    assert served.chat_template == tiny_model.chat_template and served.eos_token_ids == tiny_model.eos_token_ids
    ids = torch.tensor([samples[0].token_ids])
    model.eval()
    with torch.no_grad():
        assert torch.equal(served.load_model()(input_ids=ids).logits, model(input_ids=ids).logits)

    # Resume: the restored model + optimizer take the same next steps as the run that never stopped.
    restored, optimizer_state, step = load_checkpoint(out)
    assert step == 2 and read_trainer_state(out).extra == {"run": "test"}
    assert torch.equal(torch.rand(3), rng_after_save)  # RNG restored to where the save left it
    optimizer = torch.optim.AdamW(restored.parameters(), lr=2e-3)
    optimizer.load_state_dict(optimizer_state)
    assert optimizer.state_dict()["state"][0]["step"] == 2  # Adam's bias correction continues from step 2
    _, losses_a = _train(model, samples, steps=2, optimizer=trainer.optimizer)
    _, losses_b = _train(restored, samples, steps=2, optimizer=optimizer)
    assert losses_a == pytest.approx(losses_b, abs=1e-6)
    for pa, pb in zip(model.parameters(), restored.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6)

    # Saving again over the same directory replaces it whole.
    save_checkpoint(restored, out, out, step=4)  # the checkpoint itself is a valid template
    assert read_trainer_state(out).step == 4 and read_trainer_state(out).optimizer is None


def test_incomplete_checkpoint_is_refused_clearly(tmp_path, tiny_model):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_checkpoint(tmp_path / "half")
    with pytest.raises(CheckpointError, match="tokenizer.json"):
        save_checkpoint(tiny_model.load_model(), tmp_path / "half", tmp_path / "out")
