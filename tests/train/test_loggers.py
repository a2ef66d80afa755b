"""Metric loggers: what each one wrote, read back from where it wrote it — tensorboard's event files, the
MLflow file store, the wandb offline run's transaction log, trackio's local SQLite store — equals what the run
sent (RUN/metrics.jsonl, the jsonl logger)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from conftest import unavailable
from openforge.train.config import LoggerSettings, TrainConfig
from openforge.train.loggers import LoggerUnavailable, MetricLoggers, behaviour_metrics, open_loggers
from openforge.train.records import EvalRecord, StepRecord
from support.paths import REPO

KINDS = ["tensorboard", "wandb", "mlflow", "trackio"]


def step(n: int) -> StepRecord:
    return StepRecord(
        step=n,
        reward=0.25 * n,
        pass_rate=0.25 * n,
        episodes=8,
        infrastructure_failures=n % 2,
        harnesses={"react": 8},
        groups=4,
        groups_with_signal=n,
        updated=n > 0,
        loss=1.0 / (n + 1),
        tokens=100 + n,
        trained_tokens=50 + n,
        merge_rate=0.5,
        policy_version=n + 1,
        seconds=2.0,
        elapsed_s=2.0 * (n + 1),
        tasks=["t"],
    )


LOG_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from openforge.train.config import LoggerSettings
    from openforge.train.loggers import open_loggers
    sys.path.insert(0, {tests!r})
    from train.test_loggers import EVALS, REPORT, step

    run = Path(sys.argv[1])
    settings = [LoggerSettings(kind=k, project="openforge-test", name="run-a") for k in {kinds!r}]
    loggers = open_loggers(settings, run, {{"seed": 0}})
    loggers.log_eval(EVALS[0])
    for n in range(3):
        loggers.log_step(step(n))
    loggers.log_eval(EVALS[1])
    loggers.log_report(REPORT)
    loggers.close()
""")
EVALS = [
    EvalRecord(after_steps=0, pass_at_1=0.1, graded=4, policy="base"),
    EvalRecord(after_steps=3, pass_at_1=0.5, graded=4, policy="rl"),
]
REPORT = {"behaviour": {"overall": {"error_recovery": 0.75, "episodes": 12, "tools": {"bash": 0.5}}, "note": "text"}}


def require(module: str) -> None:
    try:
        __import__(module)
    except ImportError as e:
        unavailable(f"{module} is not installed ({e}): pip install 'openforge-rl[loggers]'")


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """One run logged to every logger, in a child process (trackio reads TRACKIO_DIR when imported)."""
    for module in ("torch.utils.tensorboard", "tensorboard", "wandb", "mlflow", "trackio"):
        require(module)
    root = tmp_path_factory.mktemp("loggers")
    run = root / "run"
    run.mkdir()
    env = {
        **os.environ,
        "TRACKIO_DIR": str(root / "trackio"),
        "WANDB_SILENT": "true",
        "HOME": str(root / "home"),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")]),
    }
    script = LOG_SCRIPT.format(tests=str(REPO / "tests"), kinds=KINDS)
    r = subprocess.run([sys.executable, "-c", script, str(run)], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    sent: dict[str, dict[int, float]] = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        for name, value in row["metrics"].items():
            sent.setdefault(name, {})[row["step"]] = value
    return root, run, sent


def test_jsonl_holds_the_steps_the_evaluations_and_the_behaviour(logged):
    _, _, sent = logged
    assert sent["train/reward"] == {0: 0.0, 1: 0.25, 2: 0.5}
    assert sent["train/updated"] == {0: 0.0, 1: 1.0, 2: 1.0}
    assert sent["train/harness_episodes/react"] == {0: 8.0, 1: 8.0, 2: 8.0}
    assert sent["eval/pass_at_1"] == {0: 0.1, 3: 0.5}
    assert sent["behaviour/overall/error_recovery"] == {3: 0.75}
    assert sent["behaviour/overall/tools/bash"] == {3: 0.5}
    assert "behaviour/note" not in sent
    fields = {k for k, v in step(0).model_dump().items() if isinstance(v, (int, float)) and k != "step"}
    assert {f"train/{f}" for f in fields} <= set(sent)  # every number of steps.jsonl


def test_tensorboard_event_files(logged):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, run, sent = logged
    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == set(sent)
    for name, values in sent.items():
        assert {e.step: pytest.approx(e.value) for e in acc.Scalars(name)} == values, name


def test_mlflow_file_store(logged):
    _, run, sent = logged
    runs = [p for p in (run / "mlruns").glob("*/*") if (p / "metrics").is_dir()]
    assert len(runs) == 1
    experiment = runs[0].parent
    assert "openforge-test" in (experiment / "meta.yaml").read_text()
    assert "run-a" in (runs[0] / "meta.yaml").read_text()
    for name, values in sent.items():
        lines = (runs[0] / "metrics" / name).read_text().split("\n")
        got = {int(s): float(v) for _, v, s in (line.split() for line in lines if line)}
        assert got == pytest.approx(values), name
    assert json.loads((runs[0] / "artifacts" / "config.json").read_text()) == {"seed": 0}


def test_wandb_offline_run(logged):
    from support.wandb_log import history

    _, run, sent = logged
    files = list((run / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1
    got: dict[str, dict[int, float]] = {}
    for row in history(files[0]):
        for name, value in row.items():
            if not name.startswith("_"):
                got.setdefault(name, {})[row["_step"]] = value
    assert got == sent


def test_trackio_local_store(logged):
    root, _, sent = logged
    with sqlite3.connect(root / "trackio" / "openforge-test.db") as db:
        rows = db.execute("SELECT run_name, step, metrics FROM metrics ORDER BY id").fetchall()
    got: dict[str, dict[int, float]] = {}
    for run_name, n, metrics in rows:
        assert run_name == "run-a"
        for name, value in json.loads(metrics).items():
            if not name.startswith("_"):
                got.setdefault(name, {})[n] = value
    assert got == sent


def test_policies_evaluated_after_training_are_logged_at_the_last_step():
    seen = []

    class Memory:
        def log(self, metrics, step):
            seen.append((step, metrics))

        def close(self):
            pass

    loggers = MetricLoggers([Memory()])
    loggers.log_step(step(4))
    for label in ("base", "sft", "rl"):
        loggers.log_eval(
            EvalRecord(after_steps=5 if label == "rl" else 0, pass_at_1=0.5, graded=2, policy="p", label=label)
        )
    assert [s for s, _ in seen] == [4, 4, 4, 5]
    assert "eval/sft/pass_at_1" in seen[2][1]


def test_a_logger_whose_package_is_missing_is_named_with_its_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb → ImportError
    with pytest.raises(LoggerUnavailable, match=r"pip install 'openforge-rl\[wandb\]'"):
        open_loggers([LoggerSettings(kind="wandb")], tmp_path, {})


def test_config_takes_names_or_settings():
    config = TrainConfig.model_validate(
        {"tasks": {"families": ["create_file"]}, "loggers": ["tensorboard", {"kind": "mlflow", "project": "x"}]}
    )
    assert [(s.kind, s.project) for s in config.loggers] == [("tensorboard", "openforge"), ("mlflow", "x")]
    with pytest.raises(ValueError, match="loggers.0.kind"):
        TrainConfig.model_validate({"tasks": {"families": ["create_file"]}, "loggers": ["neptune"]})


def test_behaviour_metrics_flatten_numbers_only():
    assert behaviour_metrics({}) == {}
    assert behaviour_metrics({"behaviour": {"a": {"b": 1, "c": "x"}}}) == {"behaviour/a/b": 1.0}
