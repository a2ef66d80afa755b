"""The desktop (GUI) task family and the hand-written desktop tasks, without a container: `[environment.gui] kind =
"desktop"` in the task model, the family's split, the tasks' files (the family's server, app and checker, byte for
byte), the hacks tried against desktop tasks, the preflight that keeps a browser-only harness off them, and the
computer-use harness's desktop mode (its launch, and its requests to a desktop server: a stand-in on a real unix
socket here; the real one, Xvfb and GTK in the desktop image, in tests/rollout/test_computer_use_docker.py)."""

from __future__ import annotations

import json
import random
import socket
import threading
from pathlib import Path, PurePosixPath

import pytest
from pydantic import ValidationError

from openforge.harness import HarnessError, LaunchContext, get_adapter
from openforge.harness.computer_use_agent import BrowserError, DesktopServer, DesktopSession, tool_specs
from openforge.rollout.hacks import HACKS
from openforge.rollout.preflight import PreflightError, check_harnesses
from openforge.tasks import generate_family_tasks, load_task, load_tasks, validate_task_dir
from openforge.tasks.families import FamilyError
from openforge.tasks.families.desktop import DESKTOP_KINDS, DOMAINS, GROUPS, draw_desktop_task
from openforge.tasks.families.web import CITIES, heldout_subjects
from openforge.tasks.model import DESKTOP_SOCKET, GuiConfig
from support.paths import REPO

EXAMPLES = REPO / "examples" / "desktop-tasks"
FAMILIES = REPO / "openforge" / "tasks" / "families"


def test_gui_config_of_a_desktop_task():
    gui = GuiConfig(kind="desktop", service="python3 -I /opt/desktop/server.py start")
    assert gui.socket == DESKTOP_SOCKET and gui.start_url is None and gui.origin == ""
    with pytest.raises(ValidationError, match="start_url is a web task's"):
        GuiConfig(kind="desktop", start_url="http://127.0.0.1:8080/")
    with pytest.raises(ValidationError, match="absolute path"):
        GuiConfig(kind="desktop", socket="gui.sock")
    with pytest.raises(ValidationError, match="needs start_url"):
        GuiConfig(kind="web")
    with pytest.raises(ValidationError, match="socket is a desktop task's"):
        GuiConfig(start_url="http://127.0.0.1:8080/", socket="/run/desktop/gui.sock")


def test_examples_ship_the_familys_server_app_and_checker_unchanged():
    tasks = sorted(d for d in EXAMPLES.iterdir() if d.is_dir())
    assert len(tasks) == 3
    for d in tasks:
        assert validate_task_dir(d) == [], d
        for copy, source in (
            (d / "environment/desktop/server.py", FAMILIES / "desktop_server.py"),
            (d / "environment/desktop/app.py", FAMILIES / "desktop_app.py"),
            (d / "tests/check.py", FAMILIES / "web_check.py"),
        ):
            assert copy.read_bytes() == source.read_bytes(), (
                f"{copy.relative_to(REPO)} differs from its source: cp {source.relative_to(REPO)} "
                f"{copy.relative_to(REPO)}"
            )
        task = load_task(d)
        assert task.gui is not None and task.gui.kind == "desktop" and task.gui.socket == DESKTOP_SOCKET
        assert task.config.verifier.state_paths == ["/var/lib/deskapp"] and task.config.agent.user == "agent"
        steps = json.loads((d / "solution" / "actions.json").read_text())
        assert steps and all(s["tool"] in ("click", "type", "select", "key", "scroll") for s in steps)


def test_family_split_is_disjoint_and_deterministic(tmp_path):
    subjects = {"desktop_email": DOMAINS, "desktop_group": GROUPS}
    for kind in DESKTOP_KINDS:
        train = [draw_desktop_task(kind, random.Random(i), "train") for i in range(30)]
        held = [draw_desktop_task(kind, random.Random(i), "heldout") for i in range(30)]
        assert not {t.combo for t in train} & {t.combo for t in held}, kind
        assert {t.combo[1] for t in held} <= heldout_subjects(kind, subjects.get(kind, CITIES))
        assert 3 <= len(train[0].actions) <= 6
    a = generate_family_tasks("desktop", tmp_path / "a" / "train", 8, seed=3)
    b = generate_family_tasks("desktop", tmp_path / "b" / "train", 8, seed=3)
    assert [p.name for p in a] == [p.name for p in b] and len({p.name for p in a}) == 8
    assert {load_task(p).family for p in a} == set(DESKTOP_KINDS)
    for p in a:
        assert validate_task_dir(p) == [], p
        assert load_task(p).gui.kind == "desktop"  # type: ignore[union-attr]
    with pytest.raises(FamilyError, match="apart"):
        generate_family_tasks("desktop,web", tmp_path / "c", 2)


def test_desktop_hacks_are_tried_against_desktop_tasks_only():
    desktop = [h.name for h in HACKS if h.applies_to(True, "desktop") and h.gui_only]
    web = [h.name for h in HACKS if h.applies_to(True, "web") and h.gui_only]
    assert desktop == [
        "app-state-from-shell",
        "app-source-and-seed",
        "claim-files",
        "desktop-x-display",
        "desktop-buses",
        "replace-desktop-server",
    ]
    assert web == ["app-state-from-shell", "app-source-and-seed", "claim-files", "replace-app-server"]


def test_a_browser_only_harness_is_refused_on_desktop_tasks():
    desktop = load_tasks([EXAMPLES])
    web = load_tasks([REPO / "examples" / "gui-tasks"])
    check_harnesses(desktop + web, ["computer-use"])
    with pytest.raises(PreflightError, match=r"harness openclaw drives a browser only, but 3 task\(s\) are desktop"):
        check_harnesses(desktop, ["openclaw"])
    check_harnesses(web, ["openclaw"])
    with pytest.raises(HarnessError, match="cannot drive a desktop task"):
        get_adapter("openclaw").launch(_ctx())


def _ctx() -> LaunchContext:
    return LaunchContext(
        PurePosixPath("/b"),
        PurePosixPath("/h"),
        PurePosixPath("/w"),
        "http://127.0.0.1:1",
        "k",
        "m",
        "Mark Ada as a favorite",
        desktop_socket=DESKTOP_SOCKET,
    )


def test_computer_use_launches_on_the_desktop_server_without_navigate():
    argv = get_adapter("computer-use").launch(_ctx()).argv
    assert argv[argv.index("--desktop") + 1] == DESKTOP_SOCKET and "--start-url" not in argv
    names = {t["function"]["name"] for t in tool_specs("snapshot", desktop=True)}
    assert names == {"snapshot", "click", "type", "select", "key", "scroll", "done"}


class StandInDesktopServer:
    """A stand-in for the desktop server (the real one needs Xvfb and GTK: the Docker tests): a real unix socket
    that records each request and answers as the server does."""

    def __init__(self, path: Path):
        self.path, self.requests, self.gone = path, [], False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                request = json.loads(conn.makefile().readline())
                self.requests.append(request)
                if self.gone:
                    answer = {"error": "the app exited (status 1)"}
                elif request["op"] == "snapshot":
                    answer = {"text": 'window "Contacts"\n[1] checkbox "Favorite" (unchecked)'}
                elif request.get("ref") == "9":
                    answer = {"error": "no element [9] on the desktop"}
                else:
                    answer = {"ok": True}
                conn.sendall(json.dumps(answer).encode() + b"\n")


def test_the_desktop_session_sends_gui_operations_and_shows_errors(tmp_path):
    server = StandInDesktopServer(tmp_path / "gui.sock")
    session = DesktopSession(DesktopServer(str(server.path), timeout_s=5))
    seen, done = session.run("click", {"ref": "[1]"})
    assert not done and '[1] checkbox "Favorite"' in seen
    seen, _ = session.run("type", {"ref": "9", "text": "x"})
    assert seen.startswith("[error: no element [9] on the desktop]") and 'window "Contacts"' in seen
    seen, _ = session.run("navigate", {"url": "http://example.com/"})
    assert seen.startswith("[error: unknown tool 'navigate'")
    assert session.run("done", {"answer": "ok"}) == ("done", True) and session.answer == "ok"
    ops = [r["op"] for r in server.requests]
    assert ops == ["click", "snapshot", "type", "snapshot", "snapshot"]
    assert server.requests[0]["ref"] == "1" and server.requests[2] == {"op": "type", "ref": "9", "text": "x"}
    server.gone = True  # the desktop itself broken: the infrastructure's failure (exit 4), not an action's
    with pytest.raises(BrowserError, match="the app exited"):
        session.run("click", {"ref": "1"})
    server.sock.close()
