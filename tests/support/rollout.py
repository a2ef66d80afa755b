"""Helpers for orchestrator tests: tiny Harbor-format tasks written on the fly, `openforge eval` run in process.
No tests here."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from openforge.cli import app
from openforge.tasks import ImageMap
from support.paths import EXAMPLES

IMAGE_MAP = ImageMap.load(EXAMPLES / "image-map.yaml").to_dict()  # the shipped tasks' map (a pinned digest too)
PASSING_TEST = (
    "mkdir -p /logs/verifier\n"
    "if [ -f /app/done.txt ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
)


def make_task(
    root: Path,
    task_id: str,
    *,
    test_sh: str = PASSING_TEST,
    memory_mb: int = 512,
    solve: str = "touch done.txt\n",
    agent_timeout_s: float = 120,
) -> Path:
    d = root / task_id
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "solution").mkdir()
    (d / "instruction.md").write_text(f"Task {task_id}: create done.txt.\n")
    (d / "task.toml").write_text(
        f'version = "1.0"\n[metadata]\nid = "{task_id}"\n[verifier]\ntimeout_sec = 30.0\n[agent]\n'
        f"timeout_sec = {agent_timeout_s}\n[environment]\ncpus = 1\nmemory_mb = {memory_mb}\npids_limit = 128\n"
    )
    (d / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\nRUN mkdir -p /app\n")
    (d / "tests" / "test.sh").write_text("#!/bin/bash\n" + test_sh)
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve)
    return d


def eval_cli(tasks: Path | list[Path], run: Path, model: Path, *extra: str) -> Result:
    """`openforge eval` in this process: the react harness in Docker sandboxes, the oracle backend."""
    task_args = [a for t in ([tasks] if isinstance(tasks, Path) else tasks) for a in ("--tasks", str(t))]
    argv = ["eval", *task_args, "--harness", "react", "--sandbox", "docker", "--model", str(model)]
    return CliRunner().invoke(app, [*argv, "--backend", "oracle", "--run", str(run), *extra])
