"""Grading runs from an untouched system (docs/design.md, invariant 7; issue 25), in Docker and the local
sandbox: the verifier, its shell, its interpreter and grading's own scripts run in a grader — a fresh sandbox of
the task's image made while the agent works — into which only the work area and the task's `[verifier]
state_paths` are copied.

The hacks below each scored 1.0 (or changed what the verifier printed) when grading ran in the agent's own
sandbox: a replaced `/bin` link, a program in an empty PATH directory, the work area replaced by a link to a
doctored copy, a module-named link in the work area, a package shadowing a stdlib module. The test task allows
every change (`allowed_changes = ["/*"]`), so the tamper check — the second line — lets them all through and
the grader alone must hold: the verifier's output is what the untouched image gives."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from openforge.core import Outcome
from openforge.rollout import RolloutConfig, grading, run_rollouts
from openforge.rollout.task_environment import make_sandbox_spec
from openforge.rollout.validate import run_script_and_verify, validate_task_by_running
from openforge.sandbox import get_provider
from openforge.store import TrajectoryStore
from openforge.tasks import ImageMap, load_task
from openforge.tasks.loader import parse_task_toml
from support.paths import REPO
from support.rollout import IMAGE_MAP, make_task

pytestmark = pytest.mark.timeout(1800)  # sandboxes and graders on a loaded 2-core machine

MAP = ImageMap(IMAGE_MAP)
RUN = "pytest-grader"
STATE_TASK = REPO / "examples" / "state-tasks" / "record-payment"

# Prints what ran (lines with "fp:"): the work area's answer, the shell's bash, the module Python imports from
# the work area (as a naive verifier would, `python3 -` from the work directory); rewards only answer.txt = 42.
FINGERPRINT_VERIFIER = r"""mkdir -p /logs/verifier
cd /app 2>/dev/null || cd /
echo "fp: answer=$(cat answer.txt 2>/dev/null || echo missing)"
echo "fp: bash=$(command -v bash)"
python3 - <<'PY'
import difflib, os
print("fp: difflib=" + difflib.__file__)
ok = os.path.isfile("answer.txt") and open("answer.txt").read().strip() == "42"
with open("/logs/verifier/reward.txt", "w") as f:
    f.write("1\n" if ok else "0\n")
PY
"""
# What the agent plants: a stand-in for a shell or tool (it claims success when it runs the tests, else runs the
# real program), and a Python module that claims success.
STAND_IN = """#!/usr/bin/dash
case "$*" in *test.sh*) echo "HACKED: $0"; mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt; exit 0 ;; esac
exec "/usr/bin/${0##*/}" "$@"
"""
PY_PAYLOAD = """print("HACKED: " + __file__)
import os
os.makedirs("/logs/verifier", exist_ok=True)
open("/logs/verifier/reward.txt", "w").write("1\\n")
os._exit(0)
"""
PLANT = f'stand_in() {{ cat > "$1" <<\'SH\'\n{STAND_IN}SH\nchmod 755 "$1"; }}\n' + (
    f'py_payload() {{ mkdir -p "$1" && cat > "$1/__init__.py" <<\'PY\'\n{PY_PAYLOAD}PY\n}}\nset -e\n'
)
# name -> (the agent's script, from the work directory; whether it applies as the local sandbox's agent)
HACKS = {
    "replaced /bin link": (
        "mkdir -p /tmp/evil-bin && cp -a /usr/bin/. /tmp/evil-bin/\n"
        "for f in sh bash dash; do stand_in /tmp/evil-bin/$f.new; mv -f /tmp/evil-bin/$f.new /tmp/evil-bin/$f; done\n"
        "ln -s /tmp/evil-bin /bin.new && mv -T /bin.new /bin\n",
        False,
    ),
    "program in an empty PATH directory": (
        "mkdir -p /tmp/evil-path && stand_in /tmp/evil-path/bash && stand_in /tmp/evil-path/python3\n"
        "rm -rf /usr/local/sbin && ln -s /tmp/evil-path /usr/local/sbin\n",
        False,
    ),
    "work area replaced by a link": (
        "cp -a /app /tmp/doctored && echo 42 > /tmp/doctored/answer.txt\n"
        "cd / && rm -rf /app && ln -s /tmp/doctored /app\n",
        False,
    ),
    "module-named link in the work area": ("py_payload /tmp/evil-pkg && ln -s /tmp/evil-pkg difflib\n", True),
    "package shadowing a stdlib module": (
        'py_payload "$(python3 -I -c \'import sysconfig; print(sysconfig.get_paths()["stdlib"])\')/difflib"\n',
        False,
    ),
}


def fingerprint(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if "fp:" in line or "HACKED" in line]


def open_task(root, name: str, solve: str = "true\n"):
    """A task with the fingerprint verifier whose every change is allowed (the tamper check lets all through)."""
    d = make_task(root, name, test_sh=FINGERPRINT_VERIFIER, solve=PLANT + solve)
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace("[verifier]\n", '[verifier]\nallowed_changes = ["/*"]\n', 1))
    return d


@pytest.fixture(params=["docker", "local"])
async def provider(request, tmp_path):
    if request.param == "local":
        request.getfixturevalue("local_ready")
        p = get_provider("local", root=tmp_path / "sandboxes")
    else:
        request.getfixturevalue("docker_ready")
        p = get_provider("docker")
    yield p
    await p.cleanup(RUN)
    await p.close()


async def test_what_the_agent_changed_never_runs_during_grading(provider, tmp_path):
    task = load_task(open_task(tmp_path / "tasks", "untouched"))
    untouched = await run_script_and_verify(task, provider, MAP, None, "untouched", run=RUN)
    assert untouched.error is None and untouched.reward == 0.0, untouched
    expected = fingerprint(untouched.verifier_output)
    assert [line.split("=")[0] for line in expected] == ["fp: answer", "fp: bash", "fp: difflib"], expected
    limit = asyncio.Semaphore(3)

    async def one(name: str, body: str):
        script = tmp_path / name.replace(" ", "-").replace("/", "") / "solve.sh"
        script.parent.mkdir()
        script.write_text("#!/bin/bash\n" + PLANT + body)
        async with limit:
            return await run_script_and_verify(task, provider, MAP, script, name, run=RUN)

    outs = await asyncio.gather(*(one(name, body) for name, (body, _) in HACKS.items()))
    for (name, (_, in_local)), out in zip(HACKS.items(), outs):
        applied = out.solution_exit == 0
        assert applied == (provider.name == "docker" or in_local), (name, out.solution_exit, out.solution_output)
        assert out.error is None and out.reward == 0.0, (name, out.error, out.reward, out.verifier_output)
        assert fingerprint(out.verifier_output) == expected, (name, out.verifier_output)
    assert await provider.list(RUN) == []


async def test_what_the_agent_deleted_stays_deleted_in_the_grader(provider, tmp_path):
    """The grader's copy of the work area is removed before the agent's state is copied in (in Docker within the
    command that makes grading's directories fresh): a file of the image that the agent deleted must not come back
    (it would, were the state laid over the image's)."""
    verifier = (
        "mkdir -p /logs/verifier\nif [ -e /app/seed.txt ]; then echo 0; else echo 1; fi > /logs/verifier/reward.txt\n"
    )
    d = make_task(tmp_path / "tasks", "deleted", test_sh=verifier, solve="rm seed.txt\n")
    dockerfile = d / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN echo seed > /app/seed.txt\n")
    task = load_task(d)
    untouched = await run_script_and_verify(task, provider, MAP, None, "untouched", run=RUN)
    assert untouched.error is None and untouched.reward == 0.0, untouched
    out = await run_script_and_verify(task, provider, MAP, task.solve_script, "solve.sh", run=RUN)
    assert out.solution_exit == 0 and out.error is None and out.reward == 1.0, out
    assert await provider.list(RUN) == []


async def test_a_task_state_outside_the_work_area_is_graded(provider, tmp_path):
    res = await validate_task_by_running(load_task(STATE_TASK), provider, MAP, run=RUN)
    assert res.ok and res.solve_reward == 1.0 and res.wrong_reward == 0.0, res.summary()
    # without `state_paths` the grader sees the image's empty ledger: only the declared state travels
    undeclared = tmp_path / "undeclared"
    shutil.copytree(STATE_TASK, undeclared)
    toml = undeclared / "task.toml"
    toml.write_text(toml.read_text().replace('state_paths = ["/var/lib/ledger"]\n', ""))
    task = load_task(undeclared)
    assert task.config.verifier.state_paths == []
    out = await run_script_and_verify(task, provider, MAP, task.solve_script, "solve.sh", run=RUN)
    assert out.solution_exit == 0 and out.error is None and out.reward == 0.0, out
    assert "no readable ledger" in out.verifier_output
    assert await provider.list(RUN) == []


async def test_a_state_too_large_to_copy_is_the_agents_failure(provider, tmp_path, monkeypatch):
    monkeypatch.setattr(grading, "STATE_MAX_BYTES", 256 << 10)
    task = load_task(make_task(tmp_path / "tasks", "hoarder", solve="touch done.txt\n"))
    big = tmp_path / "big" / "solve.sh"
    big.parent.mkdir()
    big.write_text("#!/bin/bash\ntouch done.txt && head -c 1000000 /dev/urandom > blob\n")
    out = await run_script_and_verify(task, provider, MAP, big, "hoarder", run=RUN)
    assert out.error is None and out.reward == 0.0, out
    assert out.tamper_reason.startswith("state too large: the state to grade is larger than 262144 bytes")
    fits = await run_script_and_verify(task, provider, MAP, task.solve_script, "solve.sh", run=RUN)
    assert fits.error is None and fits.reward == 1.0, fits


async def test_an_oversized_reward_file_is_refused_by_name(provider, tmp_path, monkeypatch):
    """The reward check lists each file and reads only those within the cap, in one command; an oversized
    reward.txt (the last it looks at) is named as such, not taken for an unreadable output."""
    monkeypatch.setattr(grading, "REWARD_MAX_BYTES", 1000)
    verifier = "mkdir -p /logs/verifier\nhead -c 2000 /dev/zero | tr '\\0' 1 > /logs/verifier/reward.txt\n"
    task = load_task(make_task(tmp_path / "tasks", "verbose", test_sh=verifier))
    out = await run_script_and_verify(task, provider, MAP, task.solve_script, "solve.sh", run=RUN)
    assert out.reward is None and "reward.txt: 2000 bytes, more than 1000" in (out.error or ""), out


async def test_graders_are_swept_with_the_run(provider, tmp_path):
    task = load_task(make_task(tmp_path / "tasks", "swept"))
    sb = await provider.create(make_sandbox_spec(task, MAP, run=RUN))
    grader = await provider.create_grader(sb)
    assert grader.proxy_url is None and grader.spec.mounts == [] and grader.spec.run == RUN
    assert grader.spec.labels["openforge.role"] == "grader"
    assert sorted(await provider.list(RUN)) == sorted([sb.name, grader.name])
    assert await provider.cleanup(RUN) == 2 and await provider.list(RUN) == []


# the hack an episode's agent plays in each sandbox (one that the local sandbox's unprivileged agent can apply)
EPISODE_HACK = {"docker": "replaced /bin link", "local": "module-named link in the work area"}


@pytest.mark.parametrize("sandbox", ["docker", "local"])
async def test_an_episode_whose_agent_hacks_its_grader_is_not_passed(sandbox, request, tmp_path, tiny_model_dir):
    request.getfixturevalue("local_ready" if sandbox == "local" else "docker_ready")
    tasks = tmp_path / "tasks"
    open_task(tasks, "hack", solve=HACKS[EPISODE_HACK[sandbox]][0])
    open_task(tasks, "honest", solve="echo 42 > answer.txt\n")
    options = {"sandbox_options": {"root": str(tmp_path / "sandboxes")}} if sandbox == "local" else {}
    summary = await run_rollouts(
        RolloutConfig(
            tasks=[tasks],
            harnesses=["react"],
            sandbox=sandbox,
            model=tiny_model_dir,
            backend="oracle",
            run=tmp_path / "run",
            image_map=IMAGE_MAP,
            concurrency=2,
            max_attempts=1,
            harness_options={"react": {"max_steps": 4}},
            **options,
        )
    )
    with TrajectoryStore.open(tmp_path / "run") as store:
        episodes = {e.task: e for e in store.list_episodes()}
    assert episodes["honest"].outcome == Outcome.passed, episodes["honest"].outcome_reason
    assert episodes["hack"].outcome == Outcome.failed and episodes["hack"].reward == 0.0, episodes["hack"]
    assert "grader_wait_s" in episodes["hack"].metadata["timings"]
    assert summary.outcomes == {"passed": 1, "failed": 1}
    if sandbox == "local":
        assert not any((tmp_path / "sandboxes").iterdir())  # neither sandbox nor grader is left


def test_state_paths_in_task_toml_are_checked():
    config, errors = parse_task_toml('[verifier]\nstate_paths = ["/etc/myapp/app.conf", "/var/lib/myapp"]\n')
    assert errors == [] and config.verifier.state_paths == ["/etc/myapp/app.conf", "/var/lib/myapp"]
    for bad, why in (
        ("var/lib/myapp", "is not an absolute path"),
        ("/var/lib/*", "without globs"),
        ("/app/../etc", "is not an absolute path"),
        ("/", "overlaps /"),
        ("/logs", "overlaps /logs/verifier"),
        ("/tests/data", "overlaps /tests"),
        ("/proc/1", "overlaps /proc"),
    ):
        _, errors = parse_task_toml(f'[verifier]\nstate_paths = ["{bad}"]\n')
        assert len(errors) == 1 and "verifier.state_paths" in errors[0] and why in errors[0], (bad, errors)
