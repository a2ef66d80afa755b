"""`openforge train --faults`: GRPO's sandboxed episodes meet the faults (recorded on each), and every held-out
evaluation runs without and with them — pass@1 and behaviour for both in evals.jsonl and the report."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from openforge.cli import app
from openforge.store import TrajectoryStore
from openforge.train.records import read_jsonl
from support.paths import EXAMPLES


def test_train_with_faults_through_the_orchestrator(docker_ready, tmp_path, tiny_model_dir):
    config = tmp_path / "train.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "run": str(tmp_path / "run"),
                "model": str(tiny_model_dir),
                "tasks": {"dirs": [str(EXAMPLES)]},
                "harnesses": ["react"],
                "sandbox": "docker",
                "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
                "max_attempts": 1,
                "harness_options": {"react": {"max_steps": 1, "tools": ["bash"], "command_timeout_s": 2}},
                "max_new_tokens": 16,
                "rl": {"steps": 1, "prompts": 2, "group": 2, "eval_instances": 1},
            }
        )
    )
    result = CliRunner().invoke(app, ["train", "--config", str(config), "--faults", "hang:1,hang_s=5"])
    assert result.exit_code == 0, result.output
    run = tmp_path / "run"
    with TrajectoryStore.open(run / "rl") as store:
        episodes = [e for e in store.list_episodes() if e.metadata.get("final")]
    assert len(episodes) == 4
    assert all(
        [f["kind"] for f in e.metadata["faults"]] == ["hang"] and e.metadata["faults"][0]["applicable"]
        for e in episodes
    )
    evals = read_jsonl(run / "evals.jsonl")
    assert [e["after_steps"] for e in evals] == [0, 1]
    for e in evals:
        assert e["behaviour"]["episodes"] == 1 and e["behaviour_with_faults"]["episodes"] == 1
        assert e["graded_with_faults"] in (0, 1)
    report = json.loads((run / "report.json").read_text())
    assert report["faults"] == {"rl": "hang:1,hang_s=5", "eval": "hang:1,hang_s=5"}
    assert [set(e) for e in report["heldout_pass_at_1"]] == [
        {"after_steps", "pass_at_1", "by_harness", "pass_at_1_with_faults", "recovery_rate_with_faults"}
    ] * 2
    assert len(report["behaviour_with_faults"]) == 2
    assert "| after 1 step(s) | faults |" in (run / "report.md").read_text()
