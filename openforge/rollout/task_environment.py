"""Tasks meet sandboxes: the ``SandboxSpec`` for a task, and its initial state in backends that build no image.

Docker builds the task's Dockerfile (FROM lines mapped by the image map, once, where it builds), so a container
starts in the task's initial state. A backend that runs on the host's file system (``builds_images`` False: the
local one) ignores images; ``setup_environment`` then replays the Dockerfile inside the sandbox: ``WORKDIR``,
``COPY``/``ADD`` of build-context files (``copy_in``), ``ENV`` and ``RUN`` (as root, in the sandbox: like every
exec there, with no capability at all, so a third-party task's ``RUN`` cannot mount, mknod or reach the host),
and finally gives the working directory to the backend's agent user (as the base image's /app is the agent's)
through the backend's own ``chown_tree`` (`ReplayedEnvironment`). ``FROM``, ``USER`` and the rest are ignored there.
"""

from __future__ import annotations

import secrets
from pathlib import PurePosixPath
from typing import Any, Protocol, runtime_checkable

from openforge.sandbox import Sandbox, SandboxError, SandboxProvider, SandboxSpec, sandbox_name
from openforge.tasks.environment import task_environment
from openforge.tasks.images import ImageMap
from openforge.tasks.local import LocalEmulationError, copy_args, env_instruction, parse_dockerfile
from openforge.tasks.model import Task

__all__ = ["AGENT_USER", "ReplayedEnvironment", "agent_spec_user", "make_sandbox_spec", "setup_environment"]

#: The unprivileged agent of Docker and Kubernetes sandboxes (`agent_user: agent`): numeric, so that it works in
#: any image (the offline base image names it `agent`).
AGENT_USER = "1000:1000"


def agent_spec_user(task: Task, run_choice: str | None) -> str | None:
    """`SandboxSpec.user` for the agent: the run's choice (`RolloutConfig.agent_user`), else the task's
    `[agent] user`, else root; root is None (the image's user, root in Harbor images), `agent` is AGENT_USER."""
    choice = run_choice or task.config.agent.user or "root"
    return AGENT_USER if choice == "agent" else None


@runtime_checkable
class ReplayedEnvironment(Protocol):
    """A sandbox that builds no image (the local one): its execs carry no capability, so it changes file owners
    through its own privileged operation instead of `exec(["chown", ...], user="root")`; and once the replay
    is done it takes the baseline its `changed_paths` compares with (the task's initial state, as an image
    would be)."""

    async def chown_tree(self, owner: str, path: str) -> None: ...

    async def mark_initial_state(self) -> None: ...


def make_sandbox_spec(task: Task, image_map: ImageMap | None, *, name: str | None = None, run: str | None = None,
                      **overrides: Any) -> SandboxSpec:
    """A ``SandboxSpec`` for the task: its (mapped) image, or its Dockerfile's directory with the image map for
    its FROM lines; its resources (storage and the build's time limit included), workdir, ``[environment] env``
    and whether building may reach the network (``allow_internet``). ``overrides`` are further SandboxSpec
    fields (proxy_uds, mounts, user, ...)."""
    env = task_environment(task, image_map)
    res = task.resources
    fields: dict[str, Any] = {
        "name": name or sandbox_name(run or "tasks", f"{task.id}-{secrets.token_hex(4)}"),
        "cpus": res.cpus,
        "memory_mb": res.memory_mb,
        "pids": res.pids,
        "workdir": env.workdir,
        "env": dict(task.config.environment.env),
        "storage_mb": res.storage_mb,
        "build_timeout_s": res.build_timeout_s,
        "build_network": bool(task.config.environment.allow_internet),
    }
    if run is not None:
        fields["run"] = run
    if env.builds:
        fields["dockerfile_dir"] = env.context_dir
        fields["image_map"] = env.image_map.to_dict()
    else:
        fields["image"] = env.image
    fields.update(overrides)
    return SandboxSpec(**fields)


async def setup_environment(task: Task, sandbox: Sandbox, provider: SandboxProvider,
                            timeout_s: float | None = None) -> None:
    """Bring a fresh sandbox to the task's initial state where the backend did not build the image (local);
    where it did, only give the work directory to an unprivileged agent (`spec.user` AGENT_USER), as a Harbor
    image's files belong to root. Raises LocalEmulationError when a Dockerfile step cannot be replayed."""
    if provider.builds_images:
        if sandbox.spec.user == AGENT_USER and sandbox.spec.workdir:
            r = await sandbox.exec(["chown", "-R", AGENT_USER, sandbox.spec.workdir], timeout_s=timeout_s or 300,
                                   user="0:0", workdir="/")
            if r.exit_code != 0:
                raise SandboxError(f"sandbox {sandbox.name}: cannot give {sandbox.spec.workdir} to the agent user: "
                                   f"{(r.stderr or r.stdout).strip()[-500:]}")
        return
    if task.dockerfile is None:
        return
    timeout = timeout_s or task.resources.build_timeout_s
    ctx = task.dockerfile.parent.resolve()
    workdir = PurePosixPath(task.workdir or sandbox.spec.workdir or "/app")
    cwd = PurePosixPath("/")
    env: dict[str, str] = {}
    if isinstance(sandbox, ReplayedEnvironment):  # root's while the steps run (they have no capability to write others')
        await sandbox.chown_tree("0:0", str(workdir))
    for instr, rest in parse_dockerfile(task.dockerfile.read_text()):
        if instr == "WORKDIR":
            cwd = cwd / rest.strip("\"'")
            await _checked(sandbox, ["mkdir", "-p", str(cwd)], "root", "/", env, timeout, f"WORKDIR {rest}")
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
            await _checked(sandbox, rest, "root", str(cwd), env, timeout, f"RUN {rest}",
                           hint=" (a replayed RUN step has no capability — no chown to another user, mknod, "
                                "mount or writes to the host's read-only /usr and /etc: such a task needs the "
                                "docker sandbox)" if isinstance(sandbox, ReplayedEnvironment) else "")
    owner = provider.agent_user
    if owner and isinstance(sandbox, ReplayedEnvironment):
        await sandbox.chown_tree(owner, str(workdir))
    elif owner:
        await _checked(sandbox, ["chown", "-R", owner, str(workdir)], "root", "/", {}, timeout, "chown workdir")
    if isinstance(sandbox, ReplayedEnvironment):
        await sandbox.mark_initial_state()


async def _checked(sandbox: Sandbox, cmd: list[str] | str, user: str, workdir: str, env: dict[str, str],
                   timeout: float, what: str, hint: str = "") -> None:
    r = await sandbox.exec(cmd, timeout_s=timeout, user=user, workdir=workdir, env=env or None)
    if r.exit_code != 0 or r.timed_out:
        detail = (r.stderr or r.stdout or "").strip()[-1500:]
        raise LocalEmulationError(f"{what} failed in the local sandbox (exit {r.exit_code}){hint}: {detail}")
