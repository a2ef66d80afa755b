"""Tasks meet sandboxes: the ``SandboxSpec`` for a task, and its initial state in backends that build no image.

Docker builds the task's Dockerfile (FROM lines mapped), so a container starts in the task's initial state.
The local backend runs on the host's file system and ignores images; ``setup_environment`` then replays the
Dockerfile inside the sandbox: ``WORKDIR``, ``COPY``/``ADD`` of build-context files (``copy_in``), ``ENV`` and
``RUN`` (as root, in the sandbox), and finally gives the working directory to the agent user (as the base
image's /app is the agent's). ``FROM``, ``USER`` and the rest are ignored there.
"""

from __future__ import annotations

import secrets
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

from openforge.tasks.environment import prepare_build_context, task_environment
from openforge.tasks.images import ImageMap
from openforge.tasks.local import LocalEmulationError, copy_args, parse_dockerfile
from openforge.tasks.model import Task


def builds_images(provider: Any) -> bool:
    """Whether the backend builds/runs the task's image (Docker, Kubernetes) or runs on the host (local)."""
    return getattr(provider, "name", None) != "local"


def make_sandbox_spec(
    task: Task,
    image_map: ImageMap | None,
    build_dir: str | Path | None = None,
    *,
    name: str | None = None,
    run: str | None = None,
    **overrides: Any,
) -> Any:
    """A ``SandboxSpec`` for the task: its (mapped) image or its Dockerfile with mapped FROM lines copied into
    ``build_dir`` (a fresh temporary directory the caller keeps until ``create`` returns), its resources,
    workdir and ``[environment] env``. ``overrides`` are further SandboxSpec fields (proxy_uds, mounts, ...)."""
    from openforge.sandbox import SandboxSpec, sandbox_name

    env = task_environment(task, image_map)
    res = task.resources
    fields: dict[str, Any] = {
        "name": name or sandbox_name(run or "tasks", f"{task.id}-{secrets.token_hex(4)}"),
        "cpus": res.cpus,
        "memory_mb": res.memory_mb,
        "pids": res.pids,
        "workdir": env.workdir,
        "env": dict(task.config.environment.env),
    }
    if run is not None:
        fields["run"] = run
    if env.builds:
        if build_dir is None:
            raise ValueError(f"{task.id}: its Dockerfile must be built; give a build_dir for the mapped context")
        fields["dockerfile_dir"] = prepare_build_context(env, build_dir)
    else:
        fields["image"] = env.image
    fields.update(overrides)
    return SandboxSpec(**fields)


async def setup_environment(task: Task, sandbox: Any, provider: Any, timeout_s: float | None = None) -> None:
    """Bring a fresh sandbox to the task's initial state where the backend did not build the image (local);
    nothing to do for Docker. Raises LocalEmulationError when a Dockerfile step cannot be replayed."""
    if builds_images(provider) or task.dockerfile is None:
        return
    timeout = timeout_s or task.resources.build_timeout_s
    ctx = task.dockerfile.parent.resolve()
    workdir = PurePosixPath(task.workdir or getattr(sandbox, "workdir", None) or "/app")
    cwd = PurePosixPath("/")
    env: dict[str, str] = {}
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
            if "=" in rest.split(" ", 1)[0]:
                for kv in shlex.split(rest):
                    k, _, v = kv.partition("=")
                    env[k] = v
            else:
                k, _, v = rest.partition(" ")
                env[k] = v.strip()
        elif instr == "RUN":
            await _checked(sandbox, rest, "root", str(cwd), env, timeout, f"RUN {rest}")
    owner = getattr(provider, "agent_user", None)
    if owner:
        await _checked(sandbox, ["chown", "-R", owner, str(workdir)], "root", "/", {}, timeout, "chown workdir")


async def _checked(sandbox: Any, cmd: Any, user: str, workdir: str, env: dict, timeout: float, what: str) -> None:
    r = await sandbox.exec(cmd, timeout_s=timeout, user=user, workdir=workdir, env=env or None)
    if r.exit_code != 0 or r.timed_out:
        detail = (r.stderr or r.stdout or "").strip()[-1500:]
        raise LocalEmulationError(f"{what} failed in the local sandbox (exit {r.exit_code}): {detail}")


__all__ = ["builds_images", "make_sandbox_spec", "setup_environment"]
