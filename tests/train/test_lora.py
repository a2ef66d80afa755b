"""LoRA (peft) in the embedded trainer: a step trains the adapter alone, the merged weights the engine loads
compute what the peft model computes, a checkpoint is the adapter in PEFT's own format, and a `lora` section
that does not fit names its field."""

from __future__ import annotations

import random

import pytest
import torch
from peft import PeftModel

from openforge.core import SamplingParams
from openforge.inference import GenerationContext
from openforge.inference.embedded import EmbeddedBackend
from openforge.models import ModelDir
from openforge.train import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer, save_checkpoint
from openforge.train.checkpoint import read_trainer_state
from openforge.train.config import TrainConfig
from openforge.train.lora import LoRAConfigError, adapter_dir, has_adapter, trainable_model
from openforge.train.trainer_config import LoRASettings
from support.train import family_run_config, make_sample, with_behaviour_logprobs

LORA = LoRASettings(rank=4, alpha=8, target_modules=["q_proj", "v_proj", "down_proj"])


def snapshot(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def changed(before: dict[str, torch.Tensor], model) -> set[str]:
    return {name for name, p in model.named_parameters() if not torch.equal(before[name], p.detach())}


def logits(model, ids: list[int]) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


def sft(model, steps: int = 3) -> SFTTrainer:
    rng = random.Random(5)
    config = SFTConfig(lr=1e-2, steps=steps, batch_size=4, warmup_steps=0, schedule="constant")
    trainer = SFTTrainer(model, config)
    trainer.train([make_sample(rng, "g", 1.0) for _ in range(4)])
    return trainer


def test_a_lora_sft_step_changes_only_the_adapter(tiny_model_dir):
    torch.manual_seed(0)
    model = trainable_model(tiny_model_dir, LORA)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    before = snapshot(model)
    trainer = sft(model, steps=2)
    moved = changed(before, model)
    assert moved and moved <= trainable  # the base weights are exactly as they were
    assert any(".lora_B." in n for n in moved) and any(".lora_A." in n for n in moved)  # B first, then A too
    # the optimizer holds the adapter's parameters alone (the memory LoRA saves)
    held = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert held == {id(p) for p in model.parameters() if p.requires_grad}


def test_a_lora_grpo_step_changes_only_the_adapter(tiny_model_dir):
    torch.manual_seed(0)
    model = trainable_model(tiny_model_dir, LORA)
    sft(model, steps=2)  # B != 0, so the policy is not the base one
    rng = random.Random(9)
    samples = [make_sample(rng, g, r) for g in "ab" for r in (1.0, 0.0, 1.0, 0.0)]
    samples = with_behaviour_logprobs(model, samples)
    before = snapshot(model)
    metrics = GRPOTrainer(model, GRPOConfig(lr=1e-2)).step(samples)
    assert metrics.updated
    moved = changed(before, model)
    assert moved and all(".lora_" in n for n in moved)


async def test_merged_weights_in_the_engine_compute_the_peft_models_logits(tmp_path, tiny_model_dir):
    torch.manual_seed(0)
    model = trainable_model(tiny_model_dir, LORA)
    sft(model)
    ckpt = save_checkpoint(model, tiny_model_dir, tmp_path / "ckpt", step=3, merged=True)
    assert has_adapter(ckpt) and (ckpt / "model.safetensors").is_file()
    # what `openforge proxy --model CKPT` and evaluation load: the merged weights, the adapter not again on top
    assert torch.allclose(logits(ModelDir(ckpt).load_model(), ids := [5, 6, 7, 8]), logits(model, ids), atol=1e-4)
    backend = EmbeddedBackend(tiny_model_dir, seed=0)
    ids = backend.model_dir.encode_text("merged weights, the same function")
    base = logits(backend.model, ids)
    assert await backend.load_weights(str(ckpt)) == 1
    served, trained = logits(backend.model, ids), logits(model, ids)
    assert (served - trained).abs().max() < 1e-4
    assert (base - trained).abs().max() > 1e-2  # the adapter changed the function: the check can fail
    # and what the engine samples carries logprobs of the trained policy
    result = await backend.generate(ids, SamplingParams(temperature=1.0, max_tokens=4, seed=1), GenerationContext())
    full = logits(model, ids + result.output_ids[:-1])
    expected = torch.log_softmax(full[len(ids) - 1 :], dim=-1).gather(-1, torch.tensor(result.output_ids)[:, None])
    assert torch.allclose(torch.tensor(result.logprobs), expected.squeeze(-1), atol=1e-4)
    await backend.close()


def test_a_checkpoint_is_the_adapter_in_pefts_format(tmp_path, tiny_model, tiny_model_dir):
    torch.manual_seed(0)
    model = trainable_model(tiny_model_dir, LORA)
    trainer = sft(model)
    ckpt = save_checkpoint(model, tiny_model_dir, tmp_path / "ckpt", trainer.optimizer, step=3)
    assert has_adapter(ckpt) and (adapter_dir(ckpt) / "adapter_model.safetensors").is_file()
    assert not (ckpt / "model.safetensors").exists()  # merged weights only when asked
    ids = tiny_model.encode_text("round trip")
    loaded = PeftModel.from_pretrained(tiny_model.load_model(), str(adapter_dir(ckpt)))  # peft's own loader
    assert torch.allclose(logits(loaded, ids), logits(model, ids), atol=1e-5)
    # resuming: the adapter trainable again, the optimizer state loads into its optimizer
    again = trainable_model(tiny_model_dir, LORA, ckpt)
    assert torch.allclose(logits(again, ids), logits(model, ids), atol=1e-5)
    resumed = SFTTrainer(again, SFTConfig(steps=1))
    resumed.optimizer.load_state_dict(read_trainer_state(ckpt).optimizer)
    assert {n for n, p in again.named_parameters() if p.requires_grad} == {
        n for n, p in model.named_parameters() if p.requires_grad
    }


def test_lora_config_errors_name_the_field(tiny_model_dir):
    with pytest.raises(LoRAConfigError, match=r"lora\.target_modules: the model has no module named qkv_proj.*q_proj"):
        trainable_model(tiny_model_dir, LoRASettings(target_modules=["qkv_proj"]))
    base = {"tasks": {"families": ["create_file"]}}
    with pytest.raises(ValueError, match=r"lora\.rank"):
        TrainConfig.model_validate({**base, "lora": {"rank": 0}})
    with pytest.raises(ValueError, match=r"lora\.ranks"):
        TrainConfig.model_validate({**base, "lora": {"ranks": 8}})
    assert TrainConfig.model_validate({**base, "lora": {"rank": 16}}).lora == LoRASettings(rank=16)


def test_a_lora_run_trains_serves_and_resumes_the_adapter(tmp_path, tiny_model, tiny_model_dir, local_ready):
    """GRPO with LoRA through the pipeline (families, react in process): each step's merged weights are what
    the proxy served next, the checkpoint's adapter loads onto the base model, and --resume goes on training
    the same adapter."""
    from openforge.train.pipeline import run_training
    from openforge.train.records import read_steps

    data = family_run_config(tmp_path, tiny_model_dir, steps=2, eval_every=5, lr=1e-2)
    data["lora"] = {"rank": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    report = run_training(TrainConfig.model_validate(data))
    ckpt = tmp_path / "run" / "checkpoints" / "rl"
    assert report["lora"] == {"rank": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"], "dropout": 0.0}
    assert has_adapter(ckpt) and (ckpt / "model.safetensors").is_file()
    ids = tiny_model.encode_text("after two steps")
    adapter_model = PeftModel.from_pretrained(tiny_model.load_model(), str(adapter_dir(ckpt)))
    assert torch.allclose(logits(ModelDir(ckpt).load_model(), ids), logits(adapter_model, ids), atol=1e-4)
    run_training(TrainConfig.model_validate({**data, "rl": {**data["rl"], "steps": 3}}), resume=True)
    steps = read_steps(tmp_path / "run")
    assert [r.step for r in steps] == [0, 1, 2] and [r.policy_version for r in steps] == [1, 2, 3]
    assert all(r.lora for r in steps)
    resumed = PeftModel.from_pretrained(tiny_model.load_model(), str(adapter_dir(ckpt)))
    # the random tiny model rarely earns a reward: the third step trained the adapter only if a group had signal
    same = torch.allclose(logits(resumed, ids), logits(adapter_model, ids))
    assert same != steps[2].updated
