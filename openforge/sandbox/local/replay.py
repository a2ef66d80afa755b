"""A task's initial state in the local backend, which builds no image: its Dockerfile replayed in the sandbox.

`WORKDIR`, `COPY`/`ADD` of build-context files (`copy_in`), `ENV` and `RUN` (as root, in the sandbox: like every
exec there, with no capability at all, so a third-party task's `RUN` cannot mount, mknod or reach the host);
then the working directory is given to the backend's agent user (as the base image's /app is the agent's)
through the sandbox's own privileged `chown_tree`, and the sandbox takes the baseline its `changed_paths`
compares with (the task's initial state, as an image would be). `FROM`, `USER` and the rest are ignored.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from openforge.tasks.local import LocalEmulationError, copy_args, env_instruction, parse_dockerfile
from openforge.tasks.model import Task

if TYPE_CHECKING:
    from .sandbox import LocalSandbox

__all__ = ["replay_dockerfile"]

# Why a replayed RUN step may fail where Docker's would not.
RUN_HINT = (
    " (a replayed RUN step has no capability — no chown to another user, mknod, mount or writes to the "
    "host's read-only /usr and /etc: such a task needs the docker sandbox)"
)


async def replay_dockerfile(sandbox: LocalSandbox, task: Task, *, owner: str, timeout_s: float | None = None) -> None:
    """Replay `task`'s Dockerfile in a fresh `sandbox` and give its work directory to `owner`; raises
    LocalEmulationError when a step cannot be replayed. A task without a Dockerfile starts empty."""
    if task.dockerfile is None:
        return
    timeout = timeout_s or task.resources.build_timeout_s
    ctx = task.dockerfile.parent.resolve()
    workdir = PurePosixPath(task.workdir or sandbox.spec.workdir or "/app")
    cwd = PurePosixPath("/")
    env: dict[str, str] = {}
    await sandbox.chown_tree("0:0", str(workdir))  # root's while the steps run (they cannot write others')
    for instr, rest in parse_dockerfile(task.dockerfile.read_text()):
        if instr == "WORKDIR":
            cwd = cwd / rest.strip("\"'")
            await _checked(sandbox, ["mkdir", "-p", str(cwd)], "/", env, timeout, f"WORKDIR {rest}")
        elif instr in ("COPY", "ADD"):
            if "--from" in rest:
                raise LocalEmulationError(f"{task.id}: multi-stage COPY cannot be replayed without Docker: {rest}")
            srcs, dest = copy_args(rest)
            d = cwd / dest if not dest.startswith("/") else PurePosixPath(dest)
            for src in srcs:
                sp = (ctx / src).resolve()
                if sp != ctx and ctx not in sp.parents:
                    raise LocalEmulationError(f"{task.id}: COPY source outside the build context: {src}")
                if not sp.exists():
                    raise LocalEmulationError(f"{task.id}: COPY source not found in environment/: {src}")
                target = d / sp.name if (sp.is_file() and (dest.endswith("/") or len(srcs) > 1)) else d
                await sandbox.copy_in(sp, str(target))
        elif instr == "ENV":
            env.update(env_instruction(rest))
        elif instr == "RUN":
            await _checked(sandbox, rest, str(cwd), env, timeout, f"RUN {rest}", hint=RUN_HINT)
    if owner:
        await sandbox.chown_tree(owner, str(workdir))
    await sandbox.mark_initial_state()


async def _checked(
    sandbox: LocalSandbox,
    cmd: list[str] | str,
    workdir: str,
    env: dict[str, str],
    timeout: float,
    what: str,
    hint: str = "",
) -> None:
    """Run one step as root; LocalEmulationError with its output when it fails."""
    r = await sandbox.exec(cmd, timeout_s=timeout, user="root", workdir=workdir, env=env or None)
    if r.exit_code != 0 or r.timed_out:
        detail = (r.stderr or r.stdout or "").strip()[-1500:]
        raise LocalEmulationError(f"{what} failed in the local sandbox (exit {r.exit_code}){hint}: {detail}")
