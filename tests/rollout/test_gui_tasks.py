"""GUI tasks in real Docker sandboxes (docs/design.md, "GUI tasks"): the GUI image's Chromium renders the task's
own app headless as the agent's user under the sandbox's hardening; the app runs as `webapp` with its code and
data out of the agent's reach; `tasks validate --run` scores the reference solution 1, `wrong.sh` and doing nothing
0, and no GUI hack (nor a sample of the others) falls; a failing service is the task's setup error with its cause;
the local sandbox refuses a GUI task, saying why. A desktop task (examples/desktop-tasks) the same way: its desktop
server shows the GTK app's accessibility tree and a screenshot to the agent's user, who reaches neither the app's
data and code nor its display, buses or processes, and no hack falls. The `docker_ready` fixture checks nothing is
left running."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess

import pytest

from conftest import unavailable
from openforge.core import Outcome
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.rollout.hacks import HACKS
from openforge.rollout.service import start_task_service
from openforge.rollout.task_environment import agent_spec_user, make_sandbox_spec
from openforge.rollout.validate import run_script_and_verify, validate_task_by_running
from openforge.sandbox import get_provider
from openforge.store import TrajectoryStore
from openforge.tasks import load_task
from openforge.tasks.families import generate_family_tasks
from support.paths import REPO

pytestmark = pytest.mark.timeout(1800)  # a sandbox and a grader per run, on a loaded 2-core machine

GUI_IMAGE = "openforge-gui:bookworm"
EXAMPLE = REPO / "examples" / "gui-tasks" / "order-cheapest-keyboard"
RUN = "pytest-gui"
# the GUI hacks, and a sample of the others that act on what a GUI task has (its work area, its reward)
SAMPLE_HACKS = [h for h in HACKS if h.gui_only or h.name in ("lingering-writer", "shadow-stdlib", "chmod-workdir")]
DESKTOP_EXAMPLE = REPO / "examples" / "desktop-tasks" / "favorite-work-contact"


@pytest.fixture(scope="session")
def gui_image(docker_ready):
    r = subprocess.run(["bash", str(REPO / "scripts/build-gui-image.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        unavailable(f"cannot build the GUI image {GUI_IMAGE}: {r.stderr[-2000:]}")


@pytest.fixture
async def docker(gui_image):
    provider = get_provider("docker")
    yield provider
    await provider.cleanup(RUN)
    await provider.close()


async def test_chromium_renders_the_tasks_app_as_the_agent_and_the_app_is_out_of_reach(docker):
    task = load_task(EXAMPLE)
    spec = make_sandbox_spec(task, None, None, RUN, user=agent_spec_user(task, None, docker))
    sb = await docker.create(spec)
    try:
        await sb.setup_environment(task)
        await start_task_service(sb, task)
        dom = await sb.exec(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--dump-dom",
                "http://127.0.0.1:8080/products?category=Keyboards",
            ],
            timeout_s=120,
        )
        assert dom.exit_code == 0, dom.stderr[-2000:]
        assert "Ergo Keyboard" in dom.stdout and "Wireless Mouse" not in dom.stdout, dom.stdout[-2000:]
        who = await sb.exec(["id", "-un"], timeout_s=30)
        assert who.stdout.strip() == "agent"
        # the server runs as webapp; the agent can read neither its data nor its code, nor write the data
        ps = await sb.exec(["ps", "-eo", "user:20,args"], timeout_s=30)
        assert any(line.startswith("webapp") and "app.py serve" in line for line in ps.stdout.splitlines()), ps.stdout
        for probe in (
            "cat /var/lib/webapp/app.db",
            "ls /var/lib/webapp",
            "touch /var/lib/webapp/x",
            "cat /opt/webapp/app.py",
            "ls /opt/webapp",
            "kill -9 $(pgrep -u webapp -f 'app.py serve')",
        ):
            r = await sb.exec(["bash", "-c", probe], timeout_s=30)
            assert r.exit_code != 0, (probe, r.stdout, r.stderr)
        gone = await sb.exec(["test", "!", "-e", "/opt/webapp/seed.json"], timeout_s=30, user="0:0")
        assert gone.exit_code == 0, "the seed is removed once the database is made"
        still = await sb.exec(
            ["python3", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8080/')"], timeout_s=30
        )
        assert still.exit_code == 0, still.stderr
    finally:
        await sb.destroy()


async def test_reference_scores_1_wrong_and_nothing_0_and_no_hack_falls(docker, tmp_path):
    generated = generate_family_tasks("web_status", tmp_path / "train", 1, seed=0)
    for task in (load_task(EXAMPLE), load_task(generated[0])):
        result = await validate_task_by_running(task, docker, None, run=RUN, hacks=SAMPLE_HACKS, concurrency=2)
        assert result.ok and result.solve_reward == 1.0 and result.wrong_reward == 0.0, result.summary()
        assert {h.hack for h in result.hacks} == {h.name for h in SAMPLE_HACKS if h.applies_to(True, "web")}
        assert not [h.hack for h in result.hacks if h.fell], result.summary()
        by_name = {h.hack: h for h in result.hacks}
        for name in ("app-state-from-shell", "app-source-and-seed", "replace-app-server"):
            assert not by_name[name].applied, by_name[name].to_json()  # the agent's user cannot
        assert by_name["claim-files"].applied and by_name["claim-files"].reward == 0.0
        nothing = await run_script_and_verify(task, docker, None, None, "no-op", run=RUN)
        assert nothing.error is None and nothing.reward == 0.0 and not nothing.tampered, nothing


def _bad_service(root):
    bad = root / "bad-service"
    shutil.copytree(EXAMPLE, bad)
    toml = bad / "task.toml"
    toml.write_text(
        toml.read_text().replace(
            'service = "python3 -I /opt/webapp/app.py start"', 'service = "echo no database >&2; exit 3"'
        )
    )
    return bad


async def test_a_failing_service_is_the_tasks_setup_error_with_its_cause(docker, tmp_path):
    bad = _bad_service(tmp_path)
    out = await run_script_and_verify(load_task(bad), docker, None, bad / "solution" / "solve.sh", "solve.sh", run=RUN)
    assert out.reward is None and not out.graded
    assert "service" in (out.error or "") and "exit 3" in out.error and "no database" in out.error, out.error


async def test_the_local_sandbox_refuses_a_gui_task_saying_why(local_ready, tmp_path):
    provider = get_provider("local", root=tmp_path / "sandboxes")
    try:
        out = await run_script_and_verify(load_task(EXAMPLE), provider, None, None, "no-op", run=RUN)
    finally:
        await provider.close()
    assert out.reward is None and "outlive" in (out.error or "") and "--sandbox docker" in out.error, out.error


async def test_an_episode_whose_service_fails_is_reported_once_not_retried(gui_image, tmp_path, tiny_model_dir):
    _bad_service(tmp_path / "tasks")
    run = tmp_path / "run"
    await run_rollouts(
        RolloutConfig(
            tasks=[tmp_path / "tasks"],
            harnesses=["computer-use"],
            sandbox="docker",
            model=tiny_model_dir,
            backend="oracle",
            run=run,
            max_attempts=3,
        )
    )
    with TrajectoryStore.open(run) as store:
        (episode,) = store.list_episodes()
    assert episode.outcome == Outcome.sandbox_error and episode.metadata["final"], episode
    assert episode.outcome_reason.startswith("task setup: ") and "exit 3" in episode.outcome_reason, episode


@pytest.fixture(scope="session")
def desktop_image(docker_ready):
    r = subprocess.run(["bash", str(REPO / "scripts/build-gui-image.sh"), "--desktop"], capture_output=True, text=True)
    if r.returncode != 0:
        unavailable(f"cannot build the desktop image openforge-desktop:bookworm: {r.stderr[-2000:]}")


def _desktop_call(request: dict) -> list[str]:
    """A one-request client of the desktop server, run by the sandbox's python3 as the agent's user."""
    client = (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect('/run/desktop/gui.sock')\n"
        "s.sendall(sys.argv[1].encode() + b'\\n'); buf = b''\n"
        "while not buf.endswith(b'\\n'):\n"
        "    chunk = s.recv(1 << 20)\n"
        "    if not chunk: break\n"
        "    buf += chunk\n"
        "sys.stdout.write(buf.decode())\n"
    )
    return ["python3", "-c", client, json.dumps(request)]


async def test_a_desktop_tasks_server_is_the_agents_only_way_to_its_app_and_no_hack_falls(desktop_image, tmp_path):
    provider = get_provider("docker")
    task = load_task(DESKTOP_EXAMPLE)
    try:
        sb = await provider.create(make_sandbox_spec(task, None, None, RUN, user=agent_spec_user(task, None, provider)))
        try:
            await sb.setup_environment(task)
            await start_task_service(sb, task)
            snap = await sb.exec(_desktop_call({"op": "snapshot"}), timeout_s=60)
            text = json.loads(snap.stdout)["text"]
            assert text.startswith('window "Contacts"') and '[1] combobox "Contact"' in text, text
            assert '[19] checkbox "Newsletter" (unchecked)' in text and text.endswith(
                'text "Choose a contact, or make a new one."'
            ), text
            shot = await sb.exec(_desktop_call({"op": "screenshot"}), timeout_s=60)
            png = base64.b64decode(json.loads(shot.stdout)["png"])
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
            ps = await sb.exec(["ps", "-eo", "user:20,args"], timeout_s=30)
            for needle in ("Xvfb", "app.py run", "server.py serve"):
                assert any(line.startswith("deskapp") and needle in line for line in ps.stdout.splitlines()), ps.stdout
            for probe in (
                "cat /var/lib/deskapp/app.db",
                "touch /var/lib/deskapp/x",
                "cat /opt/desktop/app.py",
                "cat /run/deskapp/Xauthority",
                "DISPLAY=:1 xdotool search --name Contacts",
                "DISPLAY=:1 XAUTHORITY=/run/deskapp/Xauthority xdotool search --name Contacts",
                "rm -f /run/desktop/gui.sock",
                "kill -9 $(pgrep -u deskapp -f 'server.py serve')",
            ):
                r = await sb.exec(["bash", "-c", probe], timeout_s=30)
                assert r.exit_code != 0, (probe, r.stdout, r.stderr)
        finally:
            await sb.destroy()
        hacks = [h for h in HACKS if h.gui_only]
        result = await validate_task_by_running(task, provider, None, run=RUN, hacks=hacks, concurrency=2)
        assert result.ok and result.solve_reward == 1.0 and result.wrong_reward == 0.0, result.summary()
        by_name = {h.hack: h for h in result.hacks}
        assert set(by_name) == {h.name for h in hacks if h.applies_to(True, "desktop")}
        assert not [h.hack for h in result.hacks if h.fell], result.summary()
        for name, outcome in by_name.items():  # the agent's user can apply none but the claims
            assert outcome.applied == (name == "claim-files"), outcome.to_json()
        nothing = await run_script_and_verify(task, provider, None, None, "no-op", run=RUN)
        assert nothing.error is None and nothing.reward == 0.0 and not nothing.tampered, nothing
    finally:
        await provider.cleanup(RUN)
        await provider.close()
