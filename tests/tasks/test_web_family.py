"""The web (GUI) task family and the hand-written web tasks, without a container: `[environment.gui]` in the task
model, the family's split, and each task's app served for real (its own `app.py serve` on a free port, SQLite)
with its reference solution (`solve.sh`, over HTTP) scoring 1 through its own `tests/test.sh`, its `wrong.sh` and
doing nothing scoring 0. The same tasks in Docker, with the app as another user and the hack suite:
tests/rollout/test_gui_tasks.py."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from pydantic import ValidationError

from openforge.rollout.hacks import HACKS
from openforge.rollout.task_environment import agent_spec_user, agent_user
from openforge.sandbox import AGENT_USER, get_provider
from openforge.tasks import generate_family_tasks, load_task, validate_task_dir
from openforge.tasks.families import FamilyError
from openforge.tasks.families.web import (
    APP_SOURCE,
    CHECK_SOURCE,
    CITIES,
    PRODUCTS,
    STATUSES,
    WEB_KINDS,
    draw_web_task,
    heldout_subjects,
)
from openforge.tasks.model import GuiConfig
from support.paths import REPO

EXAMPLES = REPO / "examples" / "gui-tasks"


def test_gui_config_names_what_is_wrong():
    gui = GuiConfig(start_url="http://127.0.0.1:8080/orders", service="start")
    assert gui.kind == "web" and gui.origin == "http://127.0.0.1:8080"
    with pytest.raises(ValidationError, match="start_url"):
        GuiConfig(start_url="127.0.0.1:8080")
    with pytest.raises(ValidationError, match="start_url is a web task's"):  # a desktop task has its socket
        GuiConfig(kind="desktop", start_url="http://127.0.0.1:8080/")


def test_a_gui_tasks_agent_is_never_root():
    task = load_task(EXAMPLES / "order-cheapest-keyboard")
    docker = get_provider("docker")
    assert agent_user(task, "root") == "agent"
    assert agent_spec_user(task, "root", docker) == AGENT_USER
    plain = load_task(REPO / "examples" / "state-tasks" / "record-payment")
    assert agent_spec_user(plain, "root", docker) is None  # the image's user: root


def test_gui_hacks_are_tried_against_gui_tasks_only():
    gui = [h.name for h in HACKS if h.gui_only]
    assert gui == [
        "app-state-from-shell",
        "app-source-and-seed",
        "claim-files",
        "replace-app-server",
        "desktop-x-display",
        "desktop-buses",
        "replace-desktop-server",
    ]
    assert all(h.applies_to(True) for h in HACKS)
    assert not any(h.applies_to(False) for h in HACKS if h.gui_only)


def test_examples_ship_the_packages_app_and_checker():
    tasks = sorted(d for d in EXAMPLES.iterdir() if d.is_dir())
    assert len(tasks) == 4
    for d in tasks:
        assert validate_task_dir(d) == [], d
        assert (d / "environment" / "webapp" / "app.py").read_text() == APP_SOURCE.read_text(), d
        assert (d / "tests" / "check.py").read_text() == CHECK_SOURCE.read_text(), d
        task = load_task(d)
        assert task.gui is not None and task.config.verifier.state_paths == ["/var/lib/webapp"]
        assert task.config.agent.user == "agent"
        assert (d / "solution" / "actions.json").is_file()


def test_family_split_is_disjoint_and_deterministic(tmp_path):
    for kind in WEB_KINDS:
        train = [draw_web_task(kind, random.Random(i), "train") for i in range(30)]
        held = [draw_web_task(kind, random.Random(i), "heldout") for i in range(30)]
        assert not {t.combo for t in train} & {t.combo for t in held}, kind
        subjects = {"web_status": STATUSES, "web_city": CITIES}.get(kind, list(PRODUCTS))
        assert {t.combo[1] for t in held} <= heldout_subjects(kind, subjects)
        for t in held:  # numbers copied from the instruction are held out by value
            for key in ("quantity", "order"):
                if key in t.params:
                    assert t.params[key] % 9 == 4, t.instruction
        assert 2 <= len(train[0].actions) <= 4
    a = generate_family_tasks("web", tmp_path / "a" / "train", 8, seed=3)
    b = generate_family_tasks("web", tmp_path / "b" / "train", 8, seed=3)
    assert [p.name for p in a] == [p.name for p in b] and len({p.name for p in a}) == 8
    assert {load_task(p).family for p in a} == set(WEB_KINDS)
    for p in a:
        assert validate_task_dir(p) == [], p
    with pytest.raises(FamilyError, match="apart"):
        generate_family_tasks("web,create_file", tmp_path / "c", 2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _grade(task_dir: Path, tmp: Path, script: str | None) -> float:
    """The task's database made from its seed, its app served (the task's own app.py, this machine's python3),
    `script` run against it (None: nothing), the app stopped, then the task's own tests/test.sh on the data."""
    data, out = tmp / "data", tmp / "out"
    shutil.rmtree(tmp, ignore_errors=True)
    data.mkdir(parents=True)
    app = task_dir / "environment" / "webapp" / "app.py"
    py = shutil.which("python3") or sys.executable
    subprocess.run(
        [py, str(app), "init", str(task_dir / "environment/webapp/seed.json"), str(data / "app.db")], check=True
    )
    port = _free_port()
    server = subprocess.Popen(
        [py, str(app), "serve", "--data", str(data), "--port", str(port)], stderr=subprocess.DEVNULL
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/", timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        if script is not None:
            env = {**os.environ, "WEBAPP_URL": url}
            subprocess.run(["bash", str(task_dir / "solution" / script)], env=env, check=True, capture_output=True)
    finally:
        server.terminate()
        server.wait(10)
    env = {**os.environ, "WEBAPP_DATA": str(data), "VERIFIER_DIR": str(out)}
    subprocess.run(["bash", str(task_dir / "tests" / "test.sh")], env=env, check=True, capture_output=True)
    return float((out / "reward.txt").read_text())


def _all_tasks(tmp_path: Path) -> list[Path]:
    generated = generate_family_tasks("web", tmp_path / "gen" / "heldout", 4, seed=1, split="heldout")
    return sorted(d for d in EXAMPLES.iterdir() if d.is_dir()) + generated


def test_reference_solutions_score_1_and_wrong_or_none_0(tmp_path):
    for d in _all_tasks(tmp_path):
        assert _grade(d, tmp_path / "run", "solve.sh") == 1.0, d.name
        assert _grade(d, tmp_path / "run", "wrong.sh") == 0.0, d.name
        assert _grade(d, tmp_path / "run", None) == 0.0, d.name


def test_a_gui_task_without_state_paths_or_actions_is_warned_about(tmp_path):
    d = tmp_path / "t"
    shutil.copytree(EXAMPLES / "swap-featured-mouse", d)
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace('state_paths = ["/var/lib/webapp"]\n', ""))
    (d / "solution" / "actions.json").unlink()
    warnings: list[str] = []
    assert validate_task_dir(d, warnings) == []
    assert any("state_paths" in w for w in warnings) and any("actions.json" in w for w in warnings), warnings


def test_a_gui_tasks_actions_are_checked(tmp_path):
    d = tmp_path / "t"
    shutil.copytree(EXAMPLES / "swap-featured-mouse", d)
    (d / "solution" / "actions.json").write_text('[{"tool": "click", "target": {"role": "button"}}]')
    errors = validate_task_dir(d)
    assert len(errors) == 1 and "actions.json" in errors[0] and "target" in errors[0], errors


@pytest.mark.parametrize("task", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_hand_written_tasks_ship_the_familys_app_and_checker_unchanged(task):
    """A task directory must be self-contained (its Dockerfile's build context, its verifier's files), so each
    hand-written web task carries a copy of the family's app and checker: the copies are the sources, byte for
    byte, so a fix to either reaches every task."""
    families = REPO / "openforge" / "tasks" / "families"
    root = EXAMPLES / task
    for copy, source in (
        (root / "environment/webapp/app.py", families / "web_app.py"),
        (root / "tests/check.py", families / "web_check.py"),
    ):
        assert copy.read_bytes() == source.read_bytes(), (
            f"{copy.relative_to(REPO)} differs from its source: cp {source.relative_to(REPO)} {copy.relative_to(REPO)}"
        )
