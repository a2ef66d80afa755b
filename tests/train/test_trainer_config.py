"""A training run's `sft:` and `rl:` blocks extend the trainers' own settings (`SFTConfig`, `GRPOConfig`): each
knob is declared once, with one default, and what the run's YAML says is what the trainer gets."""

from __future__ import annotations

import pytest

from openforge.config import ConfigError, validate_config
from openforge.train.config import RLSettings, SFTSettings, TrainConfig
from openforge.train.trainer_config import GRPOConfig, SFTConfig, SFTOptimization


@pytest.mark.parametrize(
    ("run_block", "trainer", "shared"),
    [(SFTSettings, SFTConfig, SFTOptimization), (RLSettings, GRPOConfig, GRPOConfig)],
)
def test_the_run_blocks_extend_the_trainers_settings_without_declaring_them_again(run_block, trainer, shared):
    assert issubclass(run_block, shared) and issubclass(trainer, shared)
    for cls in {run_block, trainer} - {shared}:
        assert not set(shared.model_fields) & set(cls.__annotations__), cls


def test_what_the_yaml_says_is_what_the_trainers_get():
    config = validate_config(
        {
            "tasks": {"families": ["create_file"]},
            "sft": {
                "lr": 3e-3,
                "warmup_steps": 2,
                "schedule": "constant",
                "batch_size": 8,
                "max_grad_norm": 0.5,
                "weight_decay": 0.01,
            },
            "rl": {"lr": 1e-4, "temperature": 0.7, "clip_high": 0.28, "norm_by_std": False},
        },
        TrainConfig,
    )
    sft = config.sft.trainer_config(steps=40, seed=3)
    assert sft == SFTConfig(
        lr=3e-3,
        warmup_steps=2,
        schedule="constant",
        batch_size=8,
        max_grad_norm=0.5,
        weight_decay=0.01,
        steps=40,
        seed=3,
    )
    grpo = config.rl.grpo_config()
    assert grpo == GRPOConfig(lr=1e-4, temperature=0.7, clip_high=0.28, norm_by_std=False)


def test_a_bad_trainer_knob_is_named_in_the_run_config():
    with pytest.raises(ConfigError, match=r"rl.clip_ratio_c = 0.5: must be greater than 1"):
        validate_config({"tasks": {"families": ["create_file"]}, "rl": {"clip_ratio_c": 0.5}}, TrainConfig)
