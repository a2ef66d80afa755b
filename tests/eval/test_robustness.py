"""`openforge eval --faults`: every episode without and with faults, pass@k for both, recovery per fault kind,
behaviour and its plot in the report."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from openforge.cli import app
from openforge.tasks import RECOVERY_FAMILIES, InstanceSampler, write_task


def test_eval_with_faults_reports_both(docker_ready, tmp_path, tiny_model_dir):
    """The oracle answers with (a look and) its solution, then "Done.": it never retries, so a transient failure
    of its first command fails every episode with a fault, and none without."""
    tasks = tmp_path / "tasks"
    for inst in InstanceSampler("heldout", seed=5, families=list(RECOVERY_FAMILIES)).sample(3):
        write_task(inst, tasks / inst.task_id())
    run = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--tasks",
            str(tasks),
            "--harness",
            "react",
            "--sandbox",
            "docker",
            "--model",
            str(tiny_model_dir),
            "--backend",
            "oracle",
            "--run",
            str(run),
            "--image-map",
            "debian:bookworm-slim=openforge-base:bookworm",
            "--faults",
            "transient:1",
            "--concurrency",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((run / "report.json").read_text())
    assert report["pass_at_k"]["1"] == 1.0 and report["with_faults"]["pass_at_k"]["1"] == 0.0
    r = report["robustness"]
    assert r["pass_at_k"] == {"without_faults": {"1": 1.0}, "with_faults": {"1": 0.0}}
    assert r["injected_episodes"] == 3 and r["pass_at_k_injected"] == {"1": 0.0}
    assert r["by_fault"]["transient"] == {
        "episodes": 3,
        "passed": 0,
        "pass_rate": 0.0,
        "met_error": 3,
        "recovered": 0,
        "recovery_rate": 0.0,
    }
    assert r["recovery_rate"] == 0.0 and r["not_applicable"] == {}
    assert report["behaviour"]["graded"] == 3 and report["behaviour"]["self_verification_rate"] == 0.0  # no read-back
    md = (run / "report.md").read_text()
    assert "## With faults (`transient:1`)" in md and "## Behaviour" in md and "analysis.png" in md
    assert (run / "analysis.png").read_bytes()[:4] == b"\x89PNG"
    analysis = json.loads((run / "analysis.json").read_text())
    assert sorted(s["store"] for s in analysis["stores"]) == [".", "faults"]


def test_faults_the_tasks_cannot_meet_are_listed(docker_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    for inst in InstanceSampler("heldout", seed=6, families=["create_file"]).sample(2):
        write_task(inst, tasks / inst.task_id())
    run = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--tasks",
            str(tasks),
            "--sandbox",
            "docker",
            "--model",
            str(tiny_model_dir),
            "--backend",
            "oracle",
            "--run",
            str(run),
            "--image-map",
            "debian:bookworm-slim=openforge-base:bookworm",
            "--faults",
            "missing_dir:1,flaky_service:1",
        ],
    )
    assert result.exit_code == 0, result.output
    r = json.loads((run / "report.json").read_text())["robustness"]
    assert r["injected_episodes"] == 0 and r["armed"] == {"missing_dir": 2, "flaky_service": 2}
    assert set(r["not_applicable"]) == {"missing_dir", "flaky_service"}
    assert r["pass_at_k"]["with_faults"]["1"] == 1.0  # nothing was put in: the oracle passes
