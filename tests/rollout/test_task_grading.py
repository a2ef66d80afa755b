"""Validating tasks by running them in the real local sandbox (bubblewrap): the reference solution scores 1,
wrong.sh below 1, for a sample of the shipped examples and a generated task (every example with
OPENFORGE_ALL_TASKS=1); the same logic against a FAKE in-process sandbox for its failure paths; and the
sandbox spec a task gets."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from openforge.rollout import validate as validate_mod
from openforge.rollout.task_environment import make_sandbox_spec
from openforge.rollout.validate import run_script_and_verify, validate_task_by_running
from openforge.sandbox import SandboxSpec
from openforge.tasks import ImageMap, generate_family_tasks, load_task, load_tasks
from support.paths import EXAMPLES

IMAGE_MAP = ImageMap.load(EXAMPLES / "image-map.yaml")


def _local_provider(tmp_path):
    pytest.importorskip("openforge.sandbox")
    from openforge.sandbox import get_provider, local_available

    ok, why = local_available()
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the local sandbox is unavailable in CI: {why}")
        pytest.skip(f"the local sandbox is unavailable: {why}")
    return get_provider("local", root=tmp_path / "sandboxes")


SAMPLE = ["fix-sum-range", "run-script", "organize-by-extension", "csv-top-scorer"]


def test_examples_validate_in_the_local_sandbox(tmp_path):
    provider = _local_provider(tmp_path)
    tasks = load_tasks(EXAMPLES)
    if os.environ.get("OPENFORGE_ALL_TASKS") != "1":
        tasks = [t for t in tasks if t.id in SAMPLE]

    async def main():
        results = [await validate_task_by_running(t, provider, IMAGE_MAP) for t in tasks]
        assert await provider.list("openforge-validate") == []  # nothing left behind
        return results

    for r in asyncio.run(main()):
        assert r.ok, r.summary()
        assert r.solve_reward == 1.0 and r.wrong_reward is not None and r.wrong_reward < 1.0


def test_replayed_run_steps_have_no_capability(tmp_path):
    """A third-party task's RUN steps, replayed by the local backend as root, keep no capability: they cannot
    mknod or mount (the step fails, naming why), and the workdir still ends up the agent's."""
    from openforge.tasks.local import LocalEmulationError
    from support.rollout import make_task

    if os.geteuid() != 0:
        pytest.skip("the local sandbox drops to the agent's user only as root")
    provider = _local_provider(tmp_path)
    probe = make_task(tmp_path / "tasks", "caps-probe")
    (probe / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /app\nRUN grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status > caps.txt\n"
    )
    bad = make_task(tmp_path / "tasks", "mknod-step")
    (bad / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\nRUN mknod null c 1 3\n")

    async def main():
        sb = await provider.create(make_sandbox_spec(load_task(probe), IMAGE_MAP, run="caps"))
        try:
            await sb.setup_environment(load_task(probe))
            caps = (await sb.read_file("/app/caps.txt")).decode()
            owner = (await sb.exec("stat -c %U /app /app/caps.txt", timeout_s=20)).stdout.split()
        finally:
            await sb.destroy()
        sb = await provider.create(make_sandbox_spec(load_task(bad), IMAGE_MAP, run="caps"))
        try:
            with pytest.raises(LocalEmulationError, match="no capability") as failed:
                await sb.setup_environment(load_task(bad))
        finally:
            await sb.destroy()
        return caps, owner, str(failed.value)

    caps, owner, failed = asyncio.run(main())
    assert [int(line.split()[1], 16) for line in caps.splitlines()] == [0, 0, 0], caps
    assert owner == [provider.agent_user] * 2
    assert "RUN mknod null c 1 3" in failed and "Operation not permitted" in failed


def test_do_nothing_fails_and_generated_task_validates(tmp_path):
    provider = _local_provider(tmp_path)
    task = load_task(EXAMPLES / "heldout" / "dedupe-contacts")
    (gen,) = generate_family_tasks("append_line", tmp_path / "gen", n=1, seed=3, split="heldout")
    gtask = load_task(gen)

    async def main():
        noop = await run_script_and_verify(task, provider, IMAGE_MAP, None, "nothing")
        res = await validate_task_by_running(gtask, provider, IMAGE_MAP)
        return noop, res

    noop, res = asyncio.run(main())
    assert noop.error is None and noop.reward == 0.0
    assert res.ok and res.solve_reward == 1.0 and res.wrong_reward == 0.0, res.summary()


# ---- validation by running, against a FAKE in-process sandbox (for the failure paths) -------------------------------


class _FakeResult:
    def __init__(self, rc, out):
        self.exit_code, self.stdout, self.stderr, self.timed_out = rc, out, "", False


class _FakeSandbox:
    """FAKE: maps /app, /tests, /solution and /logs to a temp dir by rewriting paths; enough for our examples
    (a sandbox that dies mid-command cannot be made on demand with a real backend)."""

    def __init__(self, root: Path, task, fail_exec: bool = False):
        self.root, self.destroyed, self.fail_exec = root, False, fail_exec
        self.spec = SandboxSpec(name="fake", workdir="/app")
        self.app = root / "app"
        from openforge.tasks.local import materialize_environment

        materialize_environment(task, self.app)

    def _local(self, s: str) -> str:
        for p in ("/app", "/tests", "/solution", "/logs"):
            s = re.sub(rf"(?<![\w/.]){p}(?=/|\b|$)", str(self.root) + p, s)
        return s

    async def exec(self, cmd, *, timeout_s, env=None, workdir=None, user=None):
        if self.fail_exec:
            raise RuntimeError("container died")
        env = {
            **os.environ,
            **(env or {}),
            "APP_DIR": str(self.app),
            "TESTS_DIR": str(self.root / "tests"),
            "VERIFIER_DIR": str(self.root / "logs" / "verifier"),
        }
        cwd = self._local(workdir) if workdir and workdir != "/" else str(self.app)
        r = subprocess.run(
            ["bash", "-c", self._local(cmd)], env=env, capture_output=True, text=True, timeout=timeout_s, cwd=cwd
        )
        return _FakeResult(r.returncode, r.stdout + r.stderr)

    async def copy_in(self, src, dest, owner=None):
        shutil.copytree(src, self._local(dest), dirs_exist_ok=True)

    async def read_file(self, path):
        p = Path(self._local(path))
        return p.read_bytes() if p.is_file() else None

    async def setup_environment(self, task, *, timeout_s=None):
        pass  # the fake sandbox starts in the task's initial state (materialized when made)

    async def destroy(self):
        self.destroyed = True


class _FakeProvider:
    def __init__(self, tmp: Path, fail_exec=False):
        self.tmp, self.sandboxes, self.fail_exec, self.task = tmp, [], fail_exec, None

    async def create(self, spec):
        sb = _FakeSandbox(self.tmp / f"sb{len(self.sandboxes)}", self.task, self.fail_exec)
        self.sandboxes.append(sb)
        return sb


class _NoGrader:
    """FAKE grader: the stand-in grading below runs in the fake sandbox itself."""

    def __init__(self, provider, sb, task):
        pass

    async def close(self):
        pass


async def _stand_in_grade(task, sb, grader, timeout_s=None):
    """FAKE grading for the stand-in sandbox: the verifier run plainly (the real grading, exercised in real
    sandboxes by test_grading_docker.py, runs root scripts that must not touch this machine's own paths)."""
    from openforge.rollout.grading import Grade
    from openforge.tasks.reward import read_reward

    await sb.exec("rm -rf /logs/verifier && mkdir -p /logs/verifier", timeout_s=60)
    await sb.copy_in(task.tests_dir, "/tests")
    r = await sb.exec("bash /tests/test.sh", timeout_s=timeout_s or 60)
    texts = [await sb.read_file(f"/logs/verifier/{n}") for n in ("reward.json", "reward.txt")]
    return Grade(
        reward=read_reward(*[t.decode() if t is not None else None for t in texts]),
        exit_code=r.exit_code,
        output=r.stdout,
    )


def test_validate_by_running_with_a_stand_in_sandbox(tmp_path, monkeypatch):
    monkeypatch.setattr(validate_mod, "make_sandbox_spec", lambda task, image_map, *args, **kw: {"task": task.id})
    monkeypatch.setattr(validate_mod, "grade", _stand_in_grade)
    monkeypatch.setattr(validate_mod, "PendingGrader", _NoGrader)
    task = load_task(EXAMPLES / "train" / "fix-sum-range")  # writes reward.json
    prov = _FakeProvider(tmp_path)
    prov.task = task
    res = asyncio.run(validate_task_by_running(task, prov, ImageMap()))
    assert res.ok and res.solve_reward == 1.0 and res.wrong_reward == 0.0, res.summary()
    assert len(prov.sandboxes) == 2 and all(sb.destroyed for sb in prov.sandboxes)

    # a task whose tests accept the wrong solution fails validation, naming wrong.sh
    bad = tmp_path / "bad"
    shutil.copytree(task.path, bad)
    (bad / "solution" / "wrong.sh").write_text((bad / "solution" / "solve.sh").read_text())
    bad_task = load_task(bad)
    prov = _FakeProvider(tmp_path / "p2")
    prov.task = bad_task
    res = asyncio.run(validate_task_by_running(bad_task, prov))
    assert not res.ok and res.wrong_reward == 1.0
    assert any("wrong.sh scored 1" in e for e in res.errors)

    # a sandbox failure is reported as such, not as a reward
    prov = _FakeProvider(tmp_path / "p3", fail_exec=True)
    prov.task = task
    res = asyncio.run(validate_task_by_running(task, prov))
    assert not res.ok and res.solve_reward is None and "sandbox failure" in res.errors[0]
    assert all(sb.destroyed for sb in prov.sandboxes)


# ---- the sandbox spec of a task --------------------------------------------------------------------------


def test_sandbox_spec_builds_the_task_directory_with_the_map_or_runs_the_mapped_image(tmp_path):
    task = load_task(EXAMPLES / "train" / "fix-sum-range")
    spec = make_sandbox_spec(task, IMAGE_MAP, run="r1", user="agent")
    # the task's own environment/ is the build context; the map travels with it and is applied once, where
    # the image is built (the Dockerfile is not rewritten on the way)
    assert spec.dockerfile_dir == task.dockerfile.parent and spec.image is None
    assert spec.image_map == {"debian:bookworm-slim": "openforge-base:bookworm"}
    assert (spec.memory_mb, spec.pids, spec.workdir, spec.run, spec.user) == (512, 256, "/app", "r1", "agent")
    assert spec.name.startswith("of-r1-fix-sum-range-")

    pinned = tmp_path / "pinned"
    shutil.copytree(task.path, pinned)
    (pinned / "task.toml").write_text(
        (pinned / "task.toml")
        .read_text()
        .replace("[environment]", '[environment]\ndocker_image = "team/fix-sum-range:1"', 1)
    )
    ptask = load_task(pinned)
    spec = make_sandbox_spec(ptask, ImageMap.parse("team/fix-sum-range:1=local/fix:1"))
    assert spec.image == "local/fix:1" and spec.dockerfile_dir is None and spec.image_map == {}
