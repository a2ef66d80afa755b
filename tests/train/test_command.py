"""`openforge train --config FILE`: config validation, a tiny run on generated families (in-process episodes,
SFT on a teacher recorded in Docker sandboxes), a run on task directories through the orchestrator, --resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from openforge.cli import app
from openforge.config import ConfigError, load_config, validate_config
from openforge.store import TrajectoryStore
from openforge.train.config import TrainConfig
from openforge.train.errors import TrainError
from openforge.train.pipeline import run_training
from openforge.train.records import read_jsonl
from support.paths import REPO

EXAMPLES = REPO / "examples" / "tasks"


def invalid(data: dict) -> str:
    with pytest.raises(ConfigError) as e:
        validate_config(data, TrainConfig, source="train.yaml")
    return str(e.value)


def test_config_errors_name_the_field_and_the_fix():
    families = {"families": ["create_file"]}
    assert "rl.group = 1: must be greater than or equal to 2" in invalid({"tasks": families, "rl": {"group": 1}})
    message = invalid({"tasks": families, "backend": "vllm:http://x:8000"})
    assert "backend" in message and "veRL" in message and "embedded" in message
    message = invalid({"tasks": families, "rl": {"stepz": 3}})
    assert "rl.stepz: unknown field" in message and "steps" in message
    assert "tasks: required" in invalid({})
    assert "exactly one of tasks.dirs" in invalid({"tasks": {"dirs": ["x"], "families": ["create_file"]}})
    assert "unknown task family nope" in invalid({"tasks": {"families": ["nope"]}})
    assert "unknown harness(es) clod" in invalid({"tasks": families, "harnesses": ["clod"]})
    assert "not a model directory" in invalid({"tasks": families, "model": "/nonexistent"})
    assert "sandbox = 'vm'" in invalid({"tasks": families, "sandbox": "vm"})
    both = {"tasks": families, "evaluation": "policies", "eval_harnesses": ["react", "codex"]}
    assert "transfer_harnesses ['codex'] are already in eval_harnesses" in invalid(
        {**both, "transfer_harnesses": ["codex"]}
    )
    assert "set `evaluation: policies`" in invalid({"tasks": families, "transfer_harnesses": ["codex"]})


def test_example_configs_are_valid():
    quick = load_config(REPO / "examples/train/quickstart-like.yaml", TrainConfig)
    assert quick.in_process and quick.sft is not None
    data = yaml.safe_load((REPO / "examples/train/mixed-harnesses.yaml").read_text())
    mixed = validate_config({**data, "model": "tiny"}, TrainConfig)  # the example names a model not present here
    assert mixed.harnesses == ["react", "claude-code", "codex"] and not mixed.in_process
    real = load_config(REPO / "examples/train/real-model-lora.yaml", TrainConfig)
    assert real.model == "smollm2-135m" and real.lora is not None and real.rl.max_staleness == 2
    web = load_config(REPO / "examples/train/web-family.yaml", TrainConfig)  # benchmarks/web_family.py runs it
    assert web.harnesses == ["computer-use"] and web.evaluation == "policies" and web.lora is not None
    assert web.harness_options["computer-use"]["observation"] == "snapshot" and not web.in_process
    tiny = load_config(REPO / "examples/train/web-family-tiny.yaml", TrainConfig)  # the run measured here
    assert tiny.model == "tiny" and tiny.harnesses == ["computer-use"] and tiny.tasks.dirs == web.tasks.dirs


def write_config(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def families_run(tmp_path_factory, tiny_model_dir, docker_ready):
    """2 RL steps on generated families (react in process), after SFT on 4 oracle demos recorded in Docker."""
    root = tmp_path_factory.mktemp("train-families")
    data = {
        "run": str(root / "run"),
        "model": str(tiny_model_dir),
        "tasks": {"families": ["create_file", "append_line"]},
        "harnesses": ["react"],
        "sandbox": "docker",
        "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
        "max_new_tokens": 64,
        "harness_options": {"react": {"max_steps": 1, "tools": ["bash"]}},
        "sft": {"teacher": "oracle", "demos": 4, "steps": 2, "warmup_steps": 1, "batch_size": 4},
        "rl": {"steps": 2, "prompts": 2, "group": 2, "eval_every": 1, "eval_instances": 4},
        "loggers": ["tensorboard"],
    }
    config = write_config(root / "train.yaml", data)
    result = CliRunner().invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return root, config, data


def test_families_run_trains_serves_and_reports(families_run):
    root, _, _ = families_run
    run = root / "run"
    steps = read_jsonl(run / "steps.jsonl")
    assert [s["step"] for s in steps] == [0, 1]
    assert [s["policy_version"] for s in steps] == [1, 2]  # each step's weights were pushed and served
    assert all(s["episodes"] == 4 and 0 <= s["reward"] <= 1 and s["tokens"] > 0 for s in steps)
    with TrajectoryStore.open(run / "rl") as store:
        served = {}
        for episode in store.list_episodes():
            for call in store.list_calls(episode.id):
                served.setdefault(episode.metadata["step"], set()).add(call.policy_version)
    assert served == {0: {0}, 1: {1}}  # step 1's episodes were sampled by the weights step 0 produced
    report = json.loads((run / "report.json").read_text())
    assert report["episode_path"] == "in-process" and report["grpo_steps"] == 2 == len(report["grpo_step_records"])
    assert [e["after_steps"] for e in report["heldout_pass_at_1"]] == [0, 1, 2]
    assert report["sft"]["samples"] == 4 and report["sft"]["steps"] == 2
    trained = {t for s in steps for t in s["tasks"]}
    assert len(report["heldout_task_ids"]) == 4 and not trained & set(report["heldout_task_ids"])
    assert all("-heldout-" in t for t in report["heldout_task_ids"]) and all("-train-" in t for t in trained)
    assert (run / "report.png").stat().st_size > 1000
    assert (run / "report.md").read_text().startswith("# Training report")
    assert (run / "checkpoints" / "rl" / "model.safetensors").is_file()
    # the loggers were sent every step and every evaluation (RUN/metrics.jsonl: what each logger got)
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["metrics"]["train/reward"] for r in logged if "train/reward" in r["metrics"]] == [
        s["reward"] for s in steps
    ]
    assert [r["step"] for r in logged if "eval/graded" in r["metrics"]] == [0, 1, 2]
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))


def test_resume_continues_from_the_last_step(families_run):
    root, config, data = families_run
    again = CliRunner().invoke(app, ["train", "--config", str(config)])
    assert again.exit_code != 0 and "--resume" in again.output  # never overwrites a run silently
    more = write_config(root / "more.yaml", {**data, "rl": {**data["rl"], "steps": 3}})
    result = CliRunner().invoke(app, ["train", "--config", str(more), "--resume"])
    assert result.exit_code == 0, result.output
    assert "reusing" in result.output  # the SFT checkpoint is not trained again
    steps = read_jsonl(root / "run" / "steps.jsonl")
    assert [s["step"] for s in steps] == [0, 1, 2]
    # policy versions go on counting across the restart: each step pushed one new version
    assert [s["policy_version"] for s in steps] == [1, 2, 3]
    with TrajectoryStore.open(root / "run" / "rl") as store:
        assert sorted({e.metadata["step"] for e in store.list_episodes()}) == [0, 1, 2]
    report = json.loads((root / "run" / "report.json").read_text())
    assert report["grpo_steps"] == 3 and report["heldout_pass_at_1"][-1]["after_steps"] == 3


def test_task_dirs_run_through_the_orchestrator(docker_ready, tmp_path, tiny_model_dir):
    config = TrainConfig.model_validate(
        {
            "run": str(tmp_path / "run"),
            "model": str(tiny_model_dir),
            "tasks": {"dirs": [str(EXAMPLES)]},
            "harnesses": ["react"],
            "sandbox": "docker",
            "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
            "max_attempts": 1,
            "max_new_tokens": 16,
            "harness_options": {"react": {"max_steps": 1, "tools": ["bash"]}},
            "rl": {"steps": 1, "prompts": 2, "group": 2, "eval_instances": 1},
        }
    )
    report = run_training(config)
    assert report["episode_path"] == "orchestrator"
    step = read_jsonl(tmp_path / "run" / "steps.jsonl")[0]
    assert step["step"] == 0 and step["episodes"] == 4 and step["policy_version"] == 1
    assert step["harnesses"] == {"react": 4} and len(step["tasks"]) == 2
    with TrajectoryStore.open(tmp_path / "run" / "rl") as store:
        episodes = [e for e in store.list_episodes() if e.metadata.get("final")]
    assert len(episodes) == 4 and {e.metadata["step"] for e in episodes} == {0}
    assert {e.task for e in episodes} == set(step["tasks"])
    heldout = report["heldout_task_ids"]
    assert len(heldout) == 1 and not set(heldout) & set(step["tasks"])
    assert [e["after_steps"] for e in report["heldout_pass_at_1"]] == [0, 1]


def test_a_run_directory_in_use_is_refused(tmp_path):
    (tmp_path / "steps.jsonl").write_text(json.dumps({"step": 0}) + "\n")
    config = TrainConfig.model_validate({"run": str(tmp_path), "tasks": {"families": ["create_file"]}})
    with pytest.raises(TrainError, match="--resume"):
        run_training(config)
