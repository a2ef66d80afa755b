"""Ctrl-C (here SIGTERM, handled the same) during a training run's sandboxed phases stops the run: exit 130, the
phase named, nothing after it run — no partial evaluation recorded, no report — and `--resume` finishes it.
Real Docker, the real `openforge train` process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import managed_containers
from openforge.rollout.orchestrator import run_label
from openforge.store import TrajectoryStore
from support.paths import EXAMPLES
from support.signals import default_sigint


def _finished(store_dir: Path) -> int:
    if not (store_dir / "trajectories.db").is_file():
        return 0
    try:
        with TrajectoryStore.open(store_dir) as store:
            return sum(e.outcome is not None for e in store.list_episodes())
    except Exception:  # noqa: BLE001 - the store is being created
        return 0


def _steps(run: Path) -> int:
    path = run / "steps.jsonl"
    return len(path.read_text().splitlines()) if path.is_file() else 0


# when to interrupt: GRPO after its first step; the held-out evaluation after its first graded episode
PHASES = {
    "grpo": ("GRPO step", lambda run: _steps(run) >= 1),
    "evaluation": ("the held-out evaluation", lambda run: _finished(run / "eval" / "base") >= 1),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_an_interrupted_run_stops_there_and_resumes(phase, docker_ready, tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    config = tmp_path / "train.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "run": str(run),
                "model": str(tiny_model_dir),
                "tasks": {"dirs": [str(EXAMPLES)]},
                "harnesses": ["react"],
                "sandbox": "docker",
                "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
                "max_attempts": 1,
                "evaluation": "policies",
                "harness_options": {"react": {"max_steps": 1, "tools": ["bash"]}},
                "max_new_tokens": 8,
                "rl": {"steps": 3, "prompts": 1, "group": 2, "concurrency": 2},
            }
        )
    )
    argv = [sys.executable, "-m", "openforge.cli", "train", "--config", str(config)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=default_sigint)
    named, reached = PHASES[phase]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not reached(run):
        time.sleep(0.2)
    assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=180)[0].decode()
    assert proc.returncode == 130, out[-3000:]
    assert f"interrupted during {named}" in out and "continue with --resume" in out, out[-2000:]
    assert not (run / "report.json").exists() and not (run / "evals.jsonl").exists()  # nothing partial recorded
    if phase == "grpo":
        assert _steps(run) < 3  # stopped there, not run on to the evaluation
    assert not [n for n in managed_containers() if run_label(run) in n]

    done = subprocess.run(argv + ["--resume"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((run / "report.json").read_text())
    assert report["grpo_steps"] == len(report["grpo_step_records"]) == 3
    evals = [json.loads(line) for line in (run / "evals.jsonl").read_text().splitlines()]
    heldout = len(list((EXAMPLES / "heldout").iterdir()))
    assert [e["label"] for e in evals] == ["base", "rl"] and all(e["graded"] == heldout for e in evals)
