"""A reduced, single-seed quickstart: the whole pipeline completes and writes its report (a smoke test of the
main job; the learning itself is measured by benchmarks/quickstart.py)."""

from __future__ import annotations

import json

from openforge.train.quickstart import quickstart_config, run_quickstart


def test_quickstart_smoke(docker_ready, tmp_path):
    config = quickstart_config(
        {
            "sandbox": "docker",
            "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
            "sft": {"demos": 8, "steps": 2, "warmup_steps": 1},
            "rl": {"seconds": 10, "steps": 2, "prompts": 2, "group": 2, "eval_instances": 8},
        },
        seed=0,
    )
    report = run_quickstart(tmp_path / "run", config)
    saved = json.loads((tmp_path / "run" / "report.json").read_text())
    assert set(saved["heldout_pass_at_1"]) == {"base", "sft", "rl"}
    assert all(0.0 <= v <= 1.0 for v in saved["heldout_pass_at_1"].values())
    assert saved["teacher_episodes"] == 8 and saved["sft"]["samples"] == 8
    records = saved["grpo_step_records"]
    assert 1 <= saved["grpo_steps"] == len(records) <= 2 and "rl_steps" not in saved
    assert records[-1]["policy_version"] == len(records)  # each step's weights were served
    assert (tmp_path / "run" / "report.png").stat().st_size > 1000
    assert (tmp_path / "run" / "report.md").read_text().startswith("# Quickstart report")
    assert report["heldout_pass_at_1"] == saved["heldout_pass_at_1"]
