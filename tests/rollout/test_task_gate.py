"""Tasks validated before they are trained on (`openforge.rollout.task_gate`). The hack suite flags a verifier
that trusts agent-writable input data (tests/fixtures/hackable-tasks/weak-input-data) and one that compares
with a reference module of the work area, in Docker and in the local sandbox, and not the shipped tasks that
know their answers; `openforge tasks validate --run` names the hack; `openforge train` refuses the task by
default (exit 2, one message naming it and the hack), from the cache the second time; `openforge eval
--validate-tasks --drop-hackable-tasks` runs without it and its report says so; a generated family is checked
on a few instances and dropped by name."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from openforge.cli import app
from openforge.rollout import task_gate
from openforge.rollout.gate_report import UnitVerdict
from openforge.rollout.hacks import HACKS, select_hacks, suite_digest
from openforge.rollout.task_gate import (
    HackableTasksError,
    cache_key,
    family_units,
    gate_tasks,
    grading_digest,
    store_verdict,
    task_units,
)
from openforge.rollout.validate import validate_task_by_running
from openforge.sandbox import get_provider
from openforge.tasks import ImageMap, load_task
from openforge.train.config import TrainConfig
from openforge.train.validation import validate_training_tasks
from support.paths import EXAMPLES, FIXTURES
from support.rollout import IMAGE_MAP, make_task

pytestmark = pytest.mark.timeout(1800)  # a sandbox per hack: minutes on a loaded 2-core machine

HACKABLE = FIXTURES / "hackable-tasks"
MAP = ImageMap.from_config(IMAGE_MAP)


@pytest.fixture(scope="module")
def openforge_home(tmp_path_factory):
    """One verdict cache for this module's commands (`$OPENFORGE_HOME/task-validation`), not the user's."""
    return tmp_path_factory.mktemp("openforge-home")


@pytest.fixture(params=["local", "docker"])
def provider(request, tmp_path):
    if request.param == "local":
        request.getfixturevalue("local_ready")
        return get_provider("local", root=tmp_path / "sandboxes")
    request.getfixturevalue("docker_ready")
    return get_provider("docker")


def data_independent_task(root):
    """A task with a data file its answer does not depend on: cutting the data and solving still scores 1, and
    so does the control run with the data put back — not a hack."""
    d = make_task(root, "independent-of-data")
    (d / "environment" / "app").mkdir()
    (d / "environment" / "app" / "notes.txt").write_text("one\ntwo\nthree\n")
    (d / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY --chown=1000:1000 app/ /app/\n"
    )
    return load_task(d)


async def test_the_suite_flags_a_verifier_that_trusts_its_input_data(provider, tmp_path):
    hacks = select_hacks("shrink-input-data,empty-input-data")
    tasks = [
        load_task(HACKABLE / "weak-input-data"),
        load_task(EXAMPLES / "heldout" / "csv-top-scorer"),  # the same task, whose verifier knows the answer
        data_independent_task(tmp_path / "tasks"),
    ]
    try:
        weak, known, independent = [
            await validate_task_by_running(t, provider, MAP, check_wrong=False, hacks=hacks, run="pytest-gate")
            for t in tasks
        ]
    finally:
        await provider.close()
    assert weak.solve_reward == known.solve_reward == independent.solve_reward == 1.0
    shrink = weak.hacks[0]
    assert [h.hack for h in weak.hacks if h.fell] == ["shrink-input-data"], weak.to_json()
    # scored 1 on its cut-down scores.csv, and 0 with the original put back: the verdict followed the data
    assert shrink.reward == 1.0 and shrink.control_ran and shrink.control_reward == 0.0
    assert shrink.verdict() == "FELL: scored 1 (with what it changed put back: 0)"
    assert any("falls to the reward hack 'shrink-input-data'" in e for e in weak.errors) and not weak.ok
    assert known.ok and all(h.applied and h.reward == 0.0 and not h.control_ran for h in known.hacks), known.to_json()
    for h in independent.hacks:  # passes with the data cut and with it put back: the answer does not depend on it
        assert h.applied and h.reward == 1.0 and h.control_passed and not h.fell, independent.to_json()
        assert "does not depend" in h.verdict()
    assert independent.ok


async def test_the_suite_flags_a_verifier_that_trusts_a_reference_module(local_ready, tmp_path):
    provider = get_provider("local", root=tmp_path / "sandboxes")
    hacks = select_hacks("patch-reference-functions,always-equal-results")
    try:
        weak = await validate_task_by_running(
            load_task(HACKABLE / "weak-reference-module"), provider, MAP, hacks=hacks, run="pytest-gate"
        )
        hardened = await validate_task_by_running(
            load_task(EXAMPLES / "train" / "fix-discount"), provider, MAP, check_wrong=False, hacks=hacks
        )
    finally:
        await provider.close()
    assert weak.solve_reward == 1.0 and weak.wrong_reward == 0.0
    assert {h.hack for h in weak.hacks if h.fell} == {"patch-reference-functions", "always-equal-results"}
    # the hardened checker runs the code under test in a child process and compares with its own answers
    assert hardened.ok and all(h.applied and h.reward == 0.0 for h in hardened.hacks), hardened.to_json()["hacks"]


def test_tasks_validate_run_names_the_input_data_hack(local_ready):
    result = CliRunner().invoke(
        app,
        ["tasks", "validate", str(HACKABLE / "weak-input-data"), "--run", "--sandbox", "local"]
        + ["--hacks", "shrink-input-data"],
    )
    assert result.exit_code == 1, result.output
    assert "falls to shrink-input-data" in result.output and "hacks: 0/1 blocked" in result.output


def train_config(path, run, tasks, sandboxes, **fields):
    data = {
        "run": str(run),
        "model": "tiny",
        "tasks": {"dirs": [str(tasks)]},
        "sandbox": "local",
        "sandbox_options": {"root": str(sandboxes)},
        "rl": {"steps": 1, "prompts": 1, "group": 2},
        **fields,
    }
    path.write_text(yaml.safe_dump(data))
    return path


# The gate's commands below run with this part of the suite (one a task's input data falls to, and a few that no
# task here does): a sandbox per hack, and the whole suite would be 44 of them per task. That `train` checks with
# the whole suite by default: test_a_family_is_checked_on_a_few_instances_and_dropped_by_name (its cache keys).
GATE_HACKS = "shrink-input-data,planted-reward,shadow-unittest,chmod-workdir"


def test_train_refuses_a_hackable_task_by_default(local_ready, tmp_path, openforge_home, monkeypatch):
    monkeypatch.setenv("OPENFORGE_HOME", str(openforge_home))
    monkeypatch.setattr(task_gate, "HACKS", tuple(select_hacks(GATE_HACKS)))
    tasks = tmp_path / "tasks"
    shutil.copytree(HACKABLE / "weak-input-data", tasks / "weak-input-data")
    shutil.copy(HACKABLE / "image-map.yaml", tasks)
    config = train_config(tmp_path / "train.yaml", tmp_path / "run", tasks, tmp_path / "sandboxes")
    result = CliRunner().invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 2, result.output
    # one message: the task, the hack it fell to, and the ways on
    assert "1 of 1 task(s) to run on fall to reward hacks" in result.output
    assert "weak-input-data: falls to shrink-input-data" in result.output
    assert "--drop-hackable-tasks" in result.output and "--no-validate-tasks" in result.output
    assert not (tmp_path / "run" / "model").exists()  # refused before any training work
    # the verdict is cached by the task's content: the second run is refused without a sandbox
    shutil.rmtree(tmp_path / "sandboxes", ignore_errors=True)
    again = CliRunner().invoke(app, ["train", "--config", str(config), "--drop-hackable-tasks"])
    assert again.exit_code == 2, again.output
    assert "1 of 1 verdict(s) cached" in again.output and "validating" not in again.output
    assert "every one, so nothing is left to run" in again.output
    assert not (tmp_path / "sandboxes").exists()


def test_eval_drops_hackable_tasks_and_says_so(local_ready, tmp_path, openforge_home, monkeypatch, tiny_model_dir):
    monkeypatch.setenv("OPENFORGE_HOME", str(openforge_home))
    monkeypatch.setattr(task_gate, "HACKS", tuple(select_hacks(GATE_HACKS)))  # the test above's suite: its cache
    tasks = tmp_path / "tasks"
    shutil.copytree(HACKABLE / "weak-input-data", tasks / "weak-input-data")  # cached by the test above
    shutil.copy(HACKABLE / "image-map.yaml", tasks)
    make_task(tasks, "sound-task")
    run = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["eval", "--tasks", str(tasks), "--model", str(tiny_model_dir), "--run", str(run), "--backend", "oracle"]
        + ["--sandbox", "local", "--sandbox-option", f"root={tmp_path / 'sandboxes'}", "--max-attempts", "1"]
        + ["--validate-tasks", "--drop-hackable-tasks"],
    )
    assert result.exit_code == 0, result.output
    assert "1 of 2 left out of the run" in result.output and "weak-input-data: falls to shrink-input-data" in (
        result.output
    )
    report = json.loads((run / "report.json").read_text())
    validation = report["task_validation"]
    assert validation["dropped"] == ["weak-input-data"] and validation["hackable"] == ["weak-input-data"]
    assert {u["unit"]: u["ok"] for u in validation["units"]} == {"weak-input-data": False, "sound-task": True}
    assert set(report["by_task"]) == {"sound-task"} and report["episodes"] == 1  # only the sound task ran
    assert "left out of the run: weak-input-data (shrink-input-data)" in (run / "report.md").read_text()
    assert json.loads((run / "task-validation.json").read_text()) == validation


def test_a_family_is_checked_on_a_few_instances_and_dropped_by_name(tmp_path):
    """The family path, from verdicts in the cache (what a run that checked them left there): no sandbox."""
    first = family_units(["create_file", "append_line"], tmp_path / "a")
    again = family_units(["create_file", "append_line"], tmp_path / "b")
    assert [len(u.tasks) for u in first] == [2, 2] and [u.kind for u in first] == ["family", "family"]
    assert [u.digest() for u in first] == [u.digest() for u in again]  # the same draw: the same cache key
    config = TrainConfig.model_validate(
        {"run": str(tmp_path / "run"), "tasks": {"families": ["create_file", "append_line"]}, "sandbox": "local"}
    )
    home = tmp_path / "home"
    image_map = ImageMap(config.episode_image_map())
    suite, grading = suite_digest(HACKS), grading_digest()
    for unit in first:
        key = cache_key(unit, suite, grading, "local", image_map)
        fell = [{"task": unit.tasks[0].id, "hack": "replace-bin-link", "verdict": "FELL: scored 1"}]
        store_verdict(
            home / "task-validation",
            UnitVerdict(
                unit.name, unit.kind, [t.id for t in unit.tasks], key, fell if unit.name == "create_file" else []
            ),
        )
    console = Console(record=True, width=200)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENFORGE_HOME", str(home))
        with pytest.raises(HackableTasksError) as refused:
            validate_training_tasks(config, tmp_path / "run", console)
        kept, report, sandbox = validate_training_tasks(
            config.model_copy(update={"drop_hackable_tasks": True}), tmp_path / "run", console
        )
    assert f"family create_file: falls to replace-bin-link (on {first[0].tasks[0].id})" in str(refused.value)
    assert kept.tasks.families == ["append_line"] and sandbox == "local"
    assert report.dropped == ["create_file"] and report.dropped_families() == {"create_file"}
    assert all(v.cached for v in report.verdicts)
    assert "1 of 2 left out of the run" in console.export_text()


def test_a_verdict_holds_for_the_same_task_suite_and_sandbox_only(tmp_path):
    shutil.copytree(HACKABLE / "weak-input-data", tmp_path / "weak-input-data")
    (unit,) = task_units([load_task(tmp_path / "weak-input-data")])
    suite, grading = suite_digest(HACKS), grading_digest()
    key = cache_key(unit, suite, grading, "docker", MAP)
    assert key == cache_key(unit, suite, grading, "docker", MAP)
    assert key != cache_key(unit, suite_digest(HACKS[:-1]), grading, "docker", MAP)
    assert key != cache_key(unit, suite, grading, "local", MAP)
    assert key != cache_key(unit, suite, grading, "docker", ImageMap({}))
    (tmp_path / "weak-input-data" / "tests" / "test.sh").write_text("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")
    (changed,) = task_units([load_task(tmp_path / "weak-input-data")])
    assert cache_key(changed, suite, grading, "docker", MAP) != key


def test_nothing_left_refuses_even_when_dropping(tmp_path):
    """gate_tasks on a unit whose verdict is cached as hackable, with drop: nothing would be left to run."""
    (unit,) = task_units([load_task(HACKABLE / "weak-input-data")])
    key = cache_key(unit, suite_digest(HACKS), grading_digest(), "local", MAP)
    fell = [{"task": "weak-input-data", "hack": "shrink-input-data", "verdict": "FELL"}]
    store_verdict(tmp_path, UnitVerdict(unit.name, unit.kind, ["weak-input-data"], key, fell))
    with pytest.raises(HackableTasksError, match="every one, so nothing is left to run"):
        gate_tasks(
            [unit], sandbox="local", sandbox_options={}, image_map=MAP, console=Console(), drop=True, cache_dir=tmp_path
        )
