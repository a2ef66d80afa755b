"""Reward hacks against the real sandboxes: the built-in suite of `tasks validate --run` against the shipped
tasks (a sample; every task with OPENFORGE_ALL_TASKS=1) in the local sandbox and in Docker — none may fall —
and against a deliberately weak verifier, which the suite must name; every class of hack issue 25 found winning
against the weak verifier and a strict one — none may fall (the suite's task-data and reference-module hacks:
tests/rollout/test_task_gate.py); then agents that hack their grader in a
real episode (a lingering writer, a replaced python3, a shadowing unittest.py, a symlinked /logs/verifier):
graded `failed`, `verifier_failed` (the agent made its verifier fail) or `verifier_error`, never `passed`, in both
sandboxes."""

from __future__ import annotations

import json
import os

import pytest

from openforge.core import Outcome
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.rollout.hacks import HACKS, select_hacks
from openforge.rollout.validate import validate_task_by_running
from openforge.sandbox import get_provider
from openforge.store import TrajectoryStore
from openforge.tasks import ImageMap, load_task, load_tasks
from support.paths import EXAMPLES, POLICIES
from support.rollout import IMAGE_MAP, make_task

pytestmark = pytest.mark.timeout(1800)  # a sandbox per hack: minutes on a loaded 2-core machine

MAP = ImageMap.from_config(IMAGE_MAP)
# a code task and a shell task whose verifier runs Python (every shipped task with OPENFORGE_ALL_TASKS=1)
SAMPLE = ["fix-discount", "write-json-config"]

# The code tasks' verifier as shipped before hardening: the tests import the agent's module from the work
# directory, with the work directory on the import path, and trust unittest's exit code.
WEAK_VERIFIER = """mkdir -p /logs/verifier
cd /app
if PYTHONPATH=/app python3 -m unittest discover -s /tests -p 'test_*.py'; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
WEAK_TEST = """import os
import unittest

import solution  # the code under test, from the work directory


class Solved(unittest.TestCase):
    def test_solved(self):
        self.assertTrue(os.path.exists("/app/done.txt"))
"""


def weak_task(root):
    d = make_task(root, "weak-verifier", test_sh=WEAK_VERIFIER)
    (d / "tests" / "test_solved.py").write_text(WEAK_TEST)
    (d / "environment" / "app").mkdir()
    (d / "environment" / "app" / "solution.py").write_text("def solve():\n    return None\n")
    (d / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY --chown=1000:1000 app/ /app/\n"
    )
    (d / "solution" / "wrong.sh").write_text("#!/bin/bash\necho nope > done.txt.not\n")
    return d


def shipped():
    tasks = load_tasks(EXAMPLES)
    if os.environ.get("OPENFORGE_ALL_TASKS") != "1":
        tasks = [t for t in tasks if t.id in SAMPLE]
    return tasks


@pytest.fixture(params=["local", "docker"])
def provider(request, tmp_path):
    if request.param == "local":
        request.getfixturevalue("local_ready")
        p = get_provider("local", root=tmp_path / "sandboxes")
    else:
        request.getfixturevalue("docker_ready")
        p = get_provider("docker")
    yield p


async def test_no_shipped_task_falls_to_a_hack(provider):
    try:
        results = [
            await validate_task_by_running(t, provider, MAP, hacks=list(HACKS), run="pytest-hacks", concurrency=4)
            for t in shipped()
        ]
    finally:
        await provider.close()
    for r in results:
        assert r.ok, r.summary()
        tried = [h for h in HACKS if h.applies_to(False)]  # the shipped shell tasks: no GUI hack
        assert len(r.hacks) == len(tried) and not [h.hack for h in r.hacks if h.fell], r.summary()
    # the suite did act: in every task, some hacks applied and were caught by the tamper check
    for r in results:
        assert any(h.applied for h in r.hacks) and any(h.tampered for h in r.hacks), r.to_json()


async def test_the_suite_names_the_hacks_a_weak_verifier_falls_to(provider, tmp_path):
    task = load_task(weak_task(tmp_path / "tasks"))
    try:
        r = await validate_task_by_running(
            task,
            provider,
            MAP,
            hacks=select_hacks("poisoned-module,patch-assertions,planted-reward,shadow-unittest"),
            run="pytest-hacks",
        )
    finally:
        await provider.close()
    fell = {h.hack for h in r.hacks if h.fell}
    # the code under test imported by the tests claims success, or makes their assertions pass
    assert fell == {"poisoned-module", "patch-assertions"}, r.to_json()
    assert not r.ok and any("falls to the reward hack 'poisoned-module'" in e for e in r.errors)
    blocked = {h.hack: h for h in r.hacks if not h.fell}
    assert blocked["shadow-unittest"].tampered == ["/app/unittest.py"]  # caught by grading, whatever the task
    assert blocked["planted-reward"].reward == 0.0  # the verifier's directory is made afresh


# What issue 25 found winning against grading in the agent's own sandbox: the /bin link or an empty PATH
# directory replaced, the standard library shadowed (a package beside a module, pythonXY.zip, pyvenv.cfg), the
# work dir replaced by a symlink or holding module-named symlinks, and the work dir locked (chmod 000) so that a
# failing episode becomes a verifier error instead of a 0.
ISSUE_25_CLASSES = (
    "module-symlinks,workdir-symlink,chmod-workdir,replace-bin-link,path-dir-link,stdlib-package-shadow,"
    "stdlib-zip,pyvenv-stdlib"
)
# A verifier that stops at its first failing command: locked out of the work dir, it writes no reward.
STRICT_VERIFIER = """set -e
cd /app
mkdir -p /logs/verifier
if [ -f done.txt ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


async def test_no_class_issue_25_found_beats_grading(provider, tmp_path):
    """Against the weak verifier (module shadowing reaches it unless grading stops it) and the strict one, in
    both sandboxes: no hack of these classes is graded passed, nor hides a failure as a verifier error."""
    tasks = [
        load_task(weak_task(tmp_path / "tasks")),
        load_task(make_task(tmp_path / "tasks", "strict", test_sh=STRICT_VERIFIER)),
    ]
    try:
        results = [
            await validate_task_by_running(
                t,
                provider,
                MAP,
                check_wrong=False,
                hacks=select_hacks(ISSUE_25_CLASSES),
                run="pytest-hacks",
                concurrency=4,
            )
            for t in tasks
        ]
    finally:
        await provider.close()
    for r in results:
        assert r.solve_reward == 1.0, r.summary()
        assert not [h.hack for h in r.hacks if h.fell], r.to_json()


def test_hack_selection_and_the_cli_report(local_ready, tmp_path):
    from typer.testing import CliRunner

    from openforge.cli import app

    assert [h.name for h in select_hacks("all")] == [h.name for h in HACKS] and select_hacks("none") == []
    with pytest.raises(ValueError, match="unknown hack.*nope.*shadow-unittest"):
        select_hacks("shadow-unittest,nope")
    report = tmp_path / "report.json"
    result = CliRunner().invoke(
        app,
        [
            "tasks",
            "validate",
            str(EXAMPLES / "train" / "fix-sum-range"),
            "--run",
            "--sandbox",
            "local",
            "--hacks",
            "shadow-unittest,planted-reward",
            "--report",
            str(report),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "hacks: 2/2 blocked" in result.output and "none fallen to" in result.output
    (entry,) = json.loads(report.read_text())["tasks"]
    assert entry["task"] == "fix-sum-range" and entry["hacks_fallen_to"] == []
    assert [(h["hack"], h["fell"]) for h in entry["hacks"]] == [("shadow-unittest", False), ("planted-reward", False)]
    assert entry["hacks"][0]["verdict"].startswith("blocked: tampered: /app/unittest.py")
    result = CliRunner().invoke(
        app,
        [
            "tasks",
            "validate",
            str(EXAMPLES / "train" / "fix-sum-range"),
            "--run",
            "--sandbox",
            "local",
            "--hacks",
            "nope",
        ],
    )
    assert result.exit_code != 0 and "--hacks: unknown hack(s) nope" in result.output


EPISODE_HACKS = ["lingering-writer", "replace-python3", "shadow-unittest", "symlinked-verifier-dir"]


@pytest.mark.parametrize("sandbox", ["local", "docker"])
async def test_agents_hacking_their_grader_are_never_passed(sandbox, request, tmp_path, tiny_model_dir):
    request.getfixturevalue("local_ready" if sandbox == "local" else "docker_ready")
    tasks = tmp_path / "tasks"
    for name in EPISODE_HACKS:  # each against the weak verifier, which these hacks beat without grading's guard
        d = weak_task(tasks)
        d.rename(tasks / f"hack-{name}")
        toml = tasks / f"hack-{name}" / "task.toml"
        toml.write_text(toml.read_text().replace('id = "weak-verifier"', f'id = "hack-{name}"'))
    options = {"sandbox_options": {"root": str(tmp_path / "sandboxes")}} if sandbox == "local" else {}
    await run_rollouts(
        RolloutConfig(
            tasks=[tasks],
            harnesses=["react"],
            sandbox=sandbox,
            model=tiny_model_dir,
            backend=f"scripted:{POLICIES / 'reward_hacks.py'}",
            run=tmp_path / "run",
            image_map=IMAGE_MAP,
            max_attempts=1,
            max_new_tokens=8192,
            **options,
        )
    )
    with TrajectoryStore.open(tmp_path / "run") as store:
        episodes = {e.task.removeprefix("hack-"): e for e in store.list_episodes()}
    assert set(episodes) == set(EPISODE_HACKS)
    for name, e in episodes.items():
        assert e.outcome in (Outcome.failed, Outcome.verifier_failed, Outcome.verifier_error) and e.reward != 1.0, (
            name,
            e.outcome,
            e.reward,
            e.outcome_reason,
        )
    assert episodes["shadow-unittest"].outcome_reason.startswith("tampered: /app/unittest.py")
    if sandbox == "docker":  # the agent is root there: its replaced interpreter is seen
        assert episodes["replace-python3"].outcome_reason.startswith("tampered: /usr/bin/python3")
