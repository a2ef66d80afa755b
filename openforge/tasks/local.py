"""Run a task's solution and verifier directly with bash in temporary directories, without a container.

For checking tasks written for it (all of ``examples/tasks``), not for isolation: scripts run as the current
user on this machine. The task's Dockerfile is emulated: ``WORKDIR``, ``COPY``/``ADD`` of files from the
environment directory into the workdir, ``ENV``, and ``RUN`` (with the workdir path rewritten to the temporary
directory); ``FROM`` and the rest are ignored. Scripts see ``APP_DIR`` (the emulated workdir), ``TESTS_DIR``
and ``VERIFIER_DIR`` (the emulated ``/logs/verifier``), so tasks written as ``${APP_DIR:-/app}`` run the same
way here and in a container.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from openforge.core.errors import InfrastructureError
from openforge.tasks.model import Task
from openforge.tasks.reward import RewardError, read_reward
from openforge.tasks.solution import SolutionError, solution_script


class LocalEmulationError(InfrastructureError, RuntimeError):
    pass


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    out = []
    for line in _join_continuations(text):
        instr, _, rest = line.partition(" ")
        out.append((instr.upper(), rest.strip()))
    return out


def copy_args(rest: str) -> tuple[list[str], str]:
    """(sources, destination) of a COPY / ADD, flags such as --chown dropped."""
    parts = rest.strip()
    if parts.startswith("["):
        import json as _json

        items = [str(x) for x in _json.loads(parts)]
    else:
        items = shlex.split(parts)
    items = [p for p in items if not p.startswith("--")]
    if len(items) < 2:
        raise LocalEmulationError(f"cannot parse COPY/ADD arguments {rest!r}")
    return items[:-1], items[-1]


def env_instruction(rest: str) -> dict[str, str]:
    """The variables an ``ENV`` instruction sets: ``K=V K2="V 2"``, or the legacy ``K value with spaces``."""
    if "=" in rest.split(" ", 1)[0]:
        return dict(kv.partition("=")[::2] for kv in shlex.split(rest))
    k, _, v = rest.partition(" ")
    return {k: v.strip()}


def _join_continuations(text: str) -> list[str]:
    lines: list[str] = []
    buf = ""
    for raw in text.splitlines():
        s = raw.rstrip()
        if not buf and (not s.strip() or s.lstrip().startswith("#")):
            continue
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        lines.append((buf + s).strip())
        buf = ""
    if buf.strip():
        lines.append(buf.strip())
    return lines


def materialize_environment(task: Task, app_dir: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """Build the task's initial workdir state in ``app_dir`` by emulating its Dockerfile; returns ENV values.

    Only paths inside the Dockerfile's WORKDIR can be emulated; anything else raises LocalEmulationError.
    """
    app_dir.mkdir(parents=True, exist_ok=True)
    if task.dockerfile is None:
        raise LocalEmulationError(f"{task.id}: no environment/Dockerfile to emulate (image {task.image!r})")
    workdir = task.workdir or "/app"
    ctx = task.dockerfile.parent
    env_vars: dict[str, str] = dict(env or {})

    def to_local(p: str) -> Path:
        if not p.startswith("/"):
            return app_dir / p
        w = workdir.rstrip("/")
        if p == w or p.startswith(w + "/"):
            return app_dir / p[len(w) :].lstrip("/")
        raise LocalEmulationError(f"{task.id}: cannot emulate a path outside the workdir {workdir}: {p}")

    for instr, rest in parse_dockerfile(task.dockerfile.read_text()):
        if instr == "WORKDIR":
            target = to_local(rest.strip("\"'"))
            target.mkdir(parents=True, exist_ok=True)
        elif instr in ("COPY", "ADD"):
            srcs, dest = copy_args(rest)
            dest_local = to_local(dest)
            for src in srcs:
                sp = (ctx / src).resolve()
                if not str(sp).startswith(str(ctx.resolve())):
                    raise LocalEmulationError(f"{task.id}: COPY source outside the build context: {src}")
                if sp.is_dir():
                    shutil.copytree(sp, dest_local, dirs_exist_ok=True)
                else:
                    target = dest_local / sp.name if dest.endswith("/") or dest_local.is_dir() else dest_local
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(sp, target)
        elif instr == "ENV":
            env_vars.update(env_instruction(rest))
        elif instr == "RUN":
            cmd = rest.replace(workdir.rstrip("/"), str(app_dir))
            r = subprocess.run(
                ["bash", "-c", cmd],
                cwd=app_dir,
                env={**os.environ, **env_vars},
                capture_output=True,
                text=True,
                timeout=60,
            )
            if r.returncode != 0:
                raise LocalEmulationError(f"{task.id}: RUN failed ({r.returncode}): {cmd}\n{r.stderr[-2000:]}")
    return env_vars


@dataclass
class LocalRun:
    reward: float | None
    error: str | None = None
    solution_output: str = ""
    verifier_output: str = ""
    files: dict[str, bytes] = field(default_factory=dict)


def snapshot_files(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` as ``{relative/path: bytes}``."""
    out: dict[str, bytes] = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def run_task_locally(task: Task, solution: str | Path | None = "solve", timeout_s: float = 60.0) -> LocalRun:
    """Emulate the environment, run ``solution`` ("solve", "wrong", a script path, or None for nothing)
    in the workdir, then run ``tests/test.sh`` and read the reward."""
    with tempfile.TemporaryDirectory(prefix=f"openforge-{task.id}-") as tmp:
        root = Path(tmp)
        app, tests, logs = root / "app", root / "tests", root / "logs" / "verifier"
        try:
            env_vars = materialize_environment(task, app)
        except LocalEmulationError as e:
            return LocalRun(reward=None, error=str(e))
        env = {
            **os.environ,
            **env_vars,
            "APP_DIR": str(app),
            "HOME": str(root),
            "TMPDIR": str(root),  # the solution's copy of solution/ goes with the rest, even on a timeout
        }
        sol_out = ""
        if solution is not None:
            if solution in ("solve", "wrong"):
                script = task.solve_script if solution == "solve" else task.wrong_script
                if script is None:
                    return LocalRun(reward=None, error=f"{task.id}: no solution/{solution}.sh")
            else:
                script = Path(solution)
            try:  # the command the oracle sends and `validate --run` runs: solution/ beside the script
                command = solution_script(script, task.config.solution.env)
            except SolutionError as e:
                return LocalRun(reward=None, error=f"{task.id}: {e}")
            try:
                r = subprocess.run(
                    ["bash", "-c", command],
                    cwd=app,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                )
                sol_out = r.stdout + r.stderr
            except subprocess.TimeoutExpired:
                return LocalRun(reward=None, error=f"{task.id}: solution timed out after {timeout_s}s")
        shutil.copytree(task.tests_dir, tests)
        logs.mkdir(parents=True)
        venv = {
            **os.environ,
            **env_vars,
            **task.config.verifier.env,
            "APP_DIR": str(app),
            "TESTS_DIR": str(tests),
            "VERIFIER_DIR": str(logs),
            "HOME": str(root),
        }
        try:
            r = subprocess.run(
                ["bash", str(tests / "test.sh")],
                cwd=app,
                env=venv,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return LocalRun(reward=None, error=f"{task.id}: verifier timed out", solution_output=sol_out)
        ver_out = r.stdout + r.stderr
        j, t = logs / "reward.json", logs / "reward.txt"
        try:
            reward = read_reward(
                j.read_text() if j.is_file() else None,
                t.read_text() if t.is_file() else None,
            )
        except RewardError as e:
            return LocalRun(reward=None, error=str(e), solution_output=sol_out, verifier_output=ver_out)
        return LocalRun(reward=reward, solution_output=sol_out, verifier_output=ver_out, files=snapshot_files(app))
