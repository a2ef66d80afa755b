"""The one sandbox interface: every backend (local process, Docker, later Kubernetes) implements it.

A *sandbox* is where one rollout acts: a harness runs in it, then its state is copied into a *grader*, a fresh
sandbox of the same environment (`SandboxProvider.create_grader`, `Sandbox.copy_state_to`) where the verifier
runs, and both are destroyed. Everything is `async` (the orchestrator runs many
episodes concurrently with asyncio); backends run blocking SDK calls on their own thread pool, never on the
event loop.

Paths given to a sandbox (`exec(workdir=)`, `copy_in(dest=)`, `copy_out(src=)`, `read_file()`, mount
targets) are paths **as seen inside the sandbox** (`/app`, `/tests`, `/logs/verifier/reward.txt`), for every
backend: the local backend maps them onto a per-sandbox directory with bubblewrap, so the orchestrator needs
no backend-specific paths.

Errors: `SandboxError` means *the infrastructure failed* (daemon unreachable, image missing, container gone,
forwarder died, ...): the orchestrator classifies it as `sandbox_error`, never as reward 0. What a command
does inside the sandbox (non-zero exit, timeout, OOM kill) is *not* an error: it comes back in
`ExecResult` / `SandboxStatus`. A path that does not exist is `FileNotFoundError` (copy_out) or `None`
(read_file).

Names are deterministic (`sandbox_name(run, episode)`) and valid for Docker and Kubernetes (DNS-1123 label:
lowercase letters, digits and '-', at most 63 characters), and every sandbox carries the labels
`openforge.managed=1`, `openforge.run=<run>` and `openforge.sandbox=<name>`, so leftovers of a crashed run can be
listed and removed with `provider.cleanup(run)`.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import os
import re
import tempfile
import threading
from abc import ABC, abstractmethod
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from openforge.tasks.model import AgentUser, Task
from openforge.core.errors import ConfigurationError, InfrastructureError

from .state import StateArchive, StateCopy

T = TypeVar("T")

DEFAULT_OUTPUT_CAP = 1 << 20  # bytes kept per stream (stdout, stderr) of one exec

LABEL_MANAGED = "openforge.managed"
LABEL_RUN = "openforge.run"
# Who started the sandbox, from $OPENFORGE_OWNER (a CI job, a user, a test session): concurrent runs sharing
# one Docker host or cluster can then find their own sandboxes.
LABEL_OWNER = "openforge.owner"
LABEL_NAME = "openforge.sandbox"
#: What a sandbox is for: `grader` marks the fresh sandbox an episode is graded in (`SandboxProvider.create_grader`).
LABEL_ROLE = "openforge.role"
GRADER_ROLE = "grader"

#: The unprivileged agent of Docker and Kubernetes sandboxes (`agent_user: agent`): numeric, so that it works in
#: any image (the offline base image names it `agent`).
AGENT_USER = "1000:1000"

_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")


class SandboxError(InfrastructureError, RuntimeError):
    """The sandbox infrastructure failed (not the agent): classified as `sandbox_error` by the orchestrator.

    The message says what failed and, where it can, what to do about it."""


class SandboxSetupError(ConfigurationError, SandboxError):
    """The sandbox backend cannot be used as this machine is set up (its package missing, no credentials): a
    SandboxError to the orchestrator, the user's configuration to a command."""


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s or "x"


def sandbox_name(run: str, episode: str, *, prefix: str = "of") -> str:
    """Deterministic sandbox name for an episode of a run, valid as a Docker container name and a Kubernetes
    pod name (DNS-1123 label, <= 63 characters). Long or unusual names are shortened and made unique with a
    hash of the full (run, episode) pair."""
    full = f"{prefix}-{_slug(run)}-{_slug(episode)}"
    if len(full) <= 63 and full == f"{prefix}-{run}-{episode}":  # nothing was lost in the slugging
        return full
    digest = hashlib.sha256(f"{run}\x00{episode}".encode()).hexdigest()[:10]
    head = full[: 63 - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}"


def label_value(text: str) -> str:
    """`text` as a valid label value (Kubernetes rules, which are stricter than Docker's): <= 63 characters
    of [A-Za-z0-9_.-], starting and ending alphanumeric; hashed when it does not fit."""
    if _LABEL_VALUE_RE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    head = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[: 63 - 11].strip("-_.")
    return f"{head}-{digest}" if head else digest


class Mount(BaseModel):
    """A host path made visible inside the sandbox (bind mount). Read-only unless said otherwise: the harness
    bundle is mounted read-only."""

    model_config = ConfigDict(frozen=True)

    source: Path
    target: str
    read_only: bool = True

    @field_validator("target")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"mount target must be an absolute path inside the sandbox, got {v!r}")
        return v


class SandboxSpec(BaseModel):
    """What to create. Provider-independent: Docker and the local backend honour every field (the local one
    as far as the machine allows, see `openforge.sandbox.local`); a Kubernetes backend maps them onto a pod.

    - `image` / `dockerfile_dir`: the environment. With `dockerfile_dir` (a build context holding a
      `Dockerfile`) the image is built and cached by content hash; it wins over `image`. The local backend
      ignores both (it runs on the host's file system, see its docstring).
    - `image_map`: base images that cannot be pulled here, mapped to local ones (`{"debian:bookworm-slim":
      "openforge-base:bookworm"}`, keys as `openforge.tasks.images.ImageMap` matches them); applied to `image`
      and to the `FROM` lines of `dockerfile_dir` where the image is built; merged over the provider's own map.
    - `cpus`, `memory_mb` (no swap on top), `pids`: limits for everything in the sandbox together.
    - `workdir`: default working directory of `exec`; `None` keeps the image's `WORKDIR` (Docker) or uses
      `/app` (local). Created if missing (owned by root in Docker; by the agent user in the local backend).
    - `env`: set for every exec (on top of the image's environment).
    - `mounts`: host paths bind-mounted in (read-only by default).
    - `proxy_uds`: the proxy's **model API** Unix socket on the host (never the admin socket). When set, the
      sandbox bridges `http://127.0.0.1:<proxy_port>` inside to it, and `Sandbox.proxy_url` says so.
    - `proxy_tcp`: local backend only, instead of `proxy_uds`: the proxy's loopback `host:port`; the sandbox
      then shares the host's network (see the local backend's docstring for what that exposes).
    - `name`: deterministic, from run + episode (`sandbox_name`). A leftover sandbox of the same name that
      openforge created (a crashed earlier attempt) is replaced; a foreign one is an error.
    - `run`: the run this sandbox belongs to; becomes the label `openforge.run=<run>` (for `cleanup`).
    - `labels`: extra labels.
    - `user`: the default user of `exec` (the agent's user, e.g. `agent` / `1000:1000` in
      `openforge-base:bookworm`); `None` = the image's user (Docker) / the local backend's agent user.
    - `timeout_s`: optional lifetime after which a backend may reap the sandbox on its own (Kubernetes
      `activeDeadlineSeconds`); Docker and local rely on `destroy()` / `cleanup()`.
    - `storage_mb`: how much the sandbox may write to its file system: Docker's storage quota where the daemon
      has one (overlay2 on xfs with `pquota`; elsewhere the provider says once that it is not enforced),
      Kubernetes' `ephemeral-storage` request and limit; None: no limit.
    - `build_timeout_s`, `build_network`: building `dockerfile_dir` may take at most this long (None: no
      limit), and its `RUN` steps reach the network only with `build_network` (the task's `allow_internet`).
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    image: str | None = None
    dockerfile_dir: Path | None = None
    image_map: dict[str, str] = Field(default_factory=dict)
    cpus: float = Field(1.0, gt=0)
    memory_mb: int = Field(2048, ge=16)
    pids: int = Field(512, ge=8)
    workdir: str | None = "/app"
    env: dict[str, str] = Field(default_factory=dict)
    mounts: list[Mount] = Field(default_factory=list)
    proxy_uds: Path | None = None
    proxy_port: int = Field(8100, ge=1, le=65535)
    proxy_tcp: str | None = None
    run: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    user: str | None = None
    timeout_s: float | None = None
    storage_mb: int | None = Field(None, ge=16)
    build_timeout_s: float | None = Field(None, gt=0)
    build_network: bool = False

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(
                f"sandbox name {v!r} must be a DNS-1123 label (lowercase letters, digits, '-', <= 63 chars); "
                "make one with openforge.sandbox.sandbox_name(run, episode)"
            )
        return v

    @field_validator("workdir")
    @classmethod
    def _abs_workdir(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"workdir must be absolute, got {v!r}")
        return v

    @model_validator(mode="after")
    def _one_proxy(self) -> SandboxSpec:
        if self.proxy_uds is not None and self.proxy_tcp is not None:
            raise ValueError("give proxy_uds or proxy_tcp, not both")
        return self

    def all_labels(self) -> dict[str, str]:
        """The labels a backend puts on the sandbox: the managed marker, run, name, then `labels`."""
        out = {LABEL_MANAGED: "1", LABEL_NAME: self.name}
        if self.run is not None:
            out[LABEL_RUN] = label_value(self.run)
        if os.environ.get("OPENFORGE_OWNER"):
            out[LABEL_OWNER] = label_value(os.environ["OPENFORGE_OWNER"])
        out.update(self.labels)
        return out


def grader_spec(spec: SandboxSpec, image: str | None = None) -> SandboxSpec:
    """The spec of the grader of a sandbox made from `spec`: the same environment (`image`: the exact image that
    sandbox runs, where the backend knows it), resources, working directory and run label (the run's leftover
    sweep finds it); its own name and the `grader` role; no proxy bridge, no mounts, the image's user."""
    update: dict[str, object] = {
        "name": sandbox_name(spec.name, GRADER_ROLE, prefix="og"),
        "proxy_uds": None,
        "proxy_tcp": None,
        "mounts": [],
        "user": None,
        "labels": {**spec.labels, LABEL_ROLE: GRADER_ROLE},
    }
    if image is not None:
        update.update(image=image, dockerfile_dir=None, image_map={})
    return spec.model_copy(update=update)


class ExecResult(BaseModel):
    """What one command did. `exit_code` is -1 when it is unknown (killed after a timeout before the runtime
    reported a status). stdout/stderr are decoded as UTF-8 (invalid bytes replaced) and each capped at the
    exec's `output_cap` bytes (the first bytes are kept; `truncated` says whether any were dropped)."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class SandboxStatus(BaseModel):
    """Is the sandbox still usable, and did the kernel's OOM killer act in it?

    `alive`: the sandbox can run commands (container running; proxy bridge, if any, up). `oom_killed`: the OOM
    killer killed a process in the sandbox at some point (not only its main process). `exit_code`: of the
    container's main process once it has stopped. `reason`: one human-readable line."""

    alive: bool
    oom_killed: bool = False
    exit_code: int | None = None
    reason: str = ""


class PathChange(BaseModel):
    """One path of a sandbox's file system that changed since the sandbox was created: `added` (did not
    exist), `changed` (content, type, mode or owner differ; a directory whose entries changed is `changed`
    too) or `deleted`. Paths are absolute, as seen inside the sandbox."""

    model_config = ConfigDict(frozen=True)

    path: str
    kind: Literal["added", "changed", "deleted"]


#: What a path is (`Sandbox.path_kinds`): a symbolic link (never followed), a directory, a regular file, else.
PathKind = Literal["link", "dir", "file", "other"]
PATH_KINDS: frozenset[str] = frozenset(get_args(PathKind))


def command_argv(cmd: list[str] | str) -> list[str]:
    """`Sandbox.exec`'s command as argv: a string runs under `bash -lc`."""
    argv = ["bash", "-lc", cmd] if isinstance(cmd, str) else list(cmd)
    if not argv:
        raise ValueError("empty command")
    return argv


async def await_worker(fut: asyncio.Future[T], cancel: threading.Event) -> T:
    """Await a command running on a worker thread. When the caller is cancelled, `cancel` tells the worker to
    kill the command and return promptly; its outcome is retrieved so asyncio does not log it as lost."""
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        cancel.set()
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        raise


class Sandbox(ABC):
    """One live sandbox. Create it with `SandboxProvider.create`; always `destroy()` it (idempotent)."""

    id: str
    name: str
    spec: SandboxSpec
    #: The proxy's model API as the harness inside sees it (`http://127.0.0.1:8100`), None when not bridged.
    proxy_url: str | None
    _destroyed: bool = False  # set by `destroy`

    @abstractmethod
    async def exec(
        self,
        cmd: list[str] | str,
        *,
        timeout_s: float,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        stdin: bytes | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        """Run `cmd` (a list: argv; a str: run by `bash -lc`) and wait for it, at most `timeout_s` seconds: then
        its whole process tree is killed and `timed_out` is set. stdin is /dev/null unless `stdin` is given.
        Raises SandboxError only when the sandbox itself fails."""

    @abstractmethod
    async def copy_in(self, src: Path, dest: str, *, owner: str | None = None) -> None:
        """Copy a host file or directory into the sandbox. A file lands at `dest` (the full path of the new
        file); a directory's contents land in directory `dest` (created, merged if it exists). Missing parent
        directories are created. `owner` ("uid[:gid]" or a user name) owns the copies; default root."""

    @abstractmethod
    async def copy_out(self, src: str, dest: Path) -> None:
        """Copy a file or directory out of the sandbox: a file to host path `dest`, a directory's contents into
        directory `dest`. Links pointing outside `dest`, device files etc. are skipped.
        Raises FileNotFoundError if `src` does not exist."""

    @abstractmethod
    async def read_file(self, path: str, *, max_bytes: int = 16 << 20) -> bytes | None:
        """A file's contents, or None if it does not exist. Raises IsADirectoryError for a directory and
        ValueError if it is larger than `max_bytes`."""

    @abstractmethod
    async def status(self) -> SandboxStatus:
        """Whether the sandbox is alive, and whether anything in it was OOM-killed."""

    async def setup_environment(self, task: Task, *, timeout_s: float | None = None) -> None:
        """Bring this fresh sandbox to the task's initial state; called once, after `create`, before anything
        runs in it. A backend that started from the task's image (Docker builds the spec's `dockerfile_dir`,
        Kubernetes runs its image) is there already: it only gives the work directory to an unprivileged agent
        (`spec.user` AGENT_USER), as a Harbor image's files belong to root (`timeout_s`, default 300 s). A
        backend that builds no image replays the task's Dockerfile instead (the local one; `timeout_s` default
        the task's `build_timeout_sec`) and raises `LocalEmulationError` when a step cannot be replayed."""
        if self.spec.user != AGENT_USER or not self.spec.workdir:
            return
        r = await self.exec(
            ["chown", "-R", AGENT_USER, self.spec.workdir], timeout_s=timeout_s or 300, user="0:0", workdir="/"
        )
        if r.exit_code != 0:
            raise SandboxError(
                f"sandbox {self.name}: cannot give {self.spec.workdir} to the agent user: "
                f"{(r.stderr or r.stdout).strip()[-500:]}"
            )

    # -- grading support (docs/design.md, invariant 7) ------------------------------------------------------

    async def stop_agent_processes(self) -> None:
        """End every process in the sandbox except its init / keep-alive, so nothing the agent started can act
        while the sandbox is graded: called after the harness exits and before the verifier runs (and again
        before its reward is read). Repeats until none remain (a fork bomb must not survive). Backends do it out
        of band where they can (Docker: from the host, the container frozen); this default does it in band, as
        root, with `kill -STOP -1` / `kill -KILL -1` rounds (`common.STOP_SCRIPT`), which suits a sandbox whose
        PID 1 is its keep-alive. Raises SandboxError when processes remain."""
        from .common import stop_script_argv

        r = await self.exec(stop_script_argv(), timeout_s=60, user="0:0", workdir="/")
        if r.exit_code != 0:
            raise SandboxError(
                f"sandbox {self.name}: could not stop the agent's processes: "
                f"{(r.stderr or r.stdout).strip()[-500:] or f'exit {r.exit_code}'}"
            )

    async def changed_paths(self) -> list[PathChange]:
        """What changed in the sandbox's file system since it was created (`PathChange`s; mount points and the
        backend's own files left out), read out of band where the backend can (Docker: `docker diff`). Used
        by grading's tamper check (`openforge.rollout.tamper`). A backend that cannot tell raises
        NotImplementedError (grading then records that the check was not made)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list the changes of its file system")

    async def existing_paths(self, paths: list[str]) -> set[str]:
        """Which of `paths` exist now (as anything, a dangling link included): `path_kinds`' keys."""
        return set(await self.path_kinds(paths))

    async def path_kinds(self, paths: list[str]) -> dict[str, PathKind]:
        """What each of `paths` that exists is now: "link" (never followed: a dangling link included), "dir",
        "file" or "other"; the directories on the way resolved inside the sandbox. Asked out of band where the
        backend can (Docker: its daemon). This default asks in band with the sandbox's `/bin/sh` (call it only
        once tamper checking has found the shell unchanged)."""
        from .common import kinds_script_argv

        found: dict[str, PathKind] = {}
        for i in range(0, len(paths), 500):
            chunk = paths[i : i + 500]
            r = await self.exec(kinds_script_argv(chunk), timeout_s=60, user="0:0", workdir="/", output_cap=16 << 20)
            if r.exit_code != 0:
                raise SandboxError(f"sandbox {self.name}: could not look up paths: {r.stderr.strip()[-500:]}")
            for record in r.stdout.split("\0"):
                kind, _, path = record.partition(" ")
                if path in chunk and kind in PATH_KINDS:
                    found[path] = cast(PathKind, kind)
        return found

    # -- graders: the state copied into a fresh sandbox (`state.py`) ----------------------------------------

    async def export_state(self, roots: list[str], archive: StateArchive) -> None:
        """Write each of `roots` (absolute paths, `state.state_roots`) that exists, as it is now, as tar into
        `archive` (links as links, numeric owners); a root that does not exist is left out. Raises
        `StateTooLargeError` past the archive's cap."""
        raise NotImplementedError(f"{type(self).__name__} cannot export its state")

    async def import_state(self, archive: IO[bytes]) -> None:
        """Extract a `StateArchive` (relative names, safe members only) at `/` as root with this sandbox's own
        tools, keeping owners and modes; the caller has removed what stood at its roots."""
        raise NotImplementedError(f"{type(self).__name__} cannot import a state")

    #: Whether `remove_paths` is a plain root command (`rm -rf` through `exec` as uid 0), so that a caller may
    #: fold the removal into a root command of its own (one command, not two); False where the backend removes
    #: with privileges its commands lack (the local backend's file operations).
    removes_by_exec: ClassVar[bool] = True
    #: Whether a process a command leaves running in the background outlives that command (a GUI task's
    #: service: `openforge.rollout.service`); False where each command's processes end with it (local).
    keeps_services: ClassVar[bool] = True

    async def remove_paths(self, paths: list[str]) -> None:
        """Remove each of `paths` (recursively; a link itself, never what it points to) as root. Raises
        SandboxError when one cannot be removed."""
        r = await self.exec(["rm", "-rf", "--", *paths], timeout_s=300, user="0:0", workdir="/")
        if r.exit_code != 0 or r.timed_out:
            raise SandboxError(f"sandbox {self.name}: cannot remove {', '.join(paths)}: {r.stderr.strip()[-500:]}")

    async def copy_state_to(
        self, grader: Sandbox, roots: list[str], *, max_bytes: int, along: tuple[Path, str] | None = None
    ) -> StateCopy:
        """Copy `roots` from this sandbox into `grader` (export, sanitize, import: `state.py`), through a
        temporary file of the orchestrator's; `StateTooLargeError` when the archive would pass `max_bytes`.
        `along=(host_dir, dest)`: a directory of the orchestrator's copied in by the same import (the task's
        tests: one copy into the grader, not two)."""
        with tempfile.TemporaryFile(prefix="openforge-state-") as tmp:
            archive = StateArchive(tmp, roots, max_bytes)
            if along is not None:
                archive.add_trusted_tree(*along)
            try:
                await self.export_state(roots, archive)
            finally:
                copied = archive.finish()  # closed while its file is open, whatever happened
            tmp.seek(0)
            await grader.import_state(tmp)
        return copied

    @abstractmethod
    async def destroy(self) -> None:
        """Remove the sandbox and everything that belongs to it (container, forwarder process, temporary
        directories). Idempotent; never raises for a sandbox that is already gone."""

    def _check(self) -> None:
        """Refuse to act on a destroyed sandbox."""
        if self._destroyed:
            raise SandboxError(f"sandbox {self.name} was destroyed")

    async def _chown_copied(self, owner: str, path: PurePosixPath) -> None:
        """After `copy_in`: give the copies to an owner given by name (numeric owners are set in the tar)."""
        r = await self.exec(["chown", "-R", owner, str(path)], timeout_s=60, user="0", workdir="/")
        if r.exit_code != 0:
            raise SandboxError(f"chown {owner} {path} failed in {self.name}: {r.stderr.strip()}")

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.destroy()


class SandboxProvider(ABC):
    """A sandbox backend: `get_provider("docker" | "local" | "kubernetes", **options)`."""

    name: ClassVar[str]

    def spec_user(self, agent: AgentUser) -> str | None:
        """`SandboxSpec.user` that runs the agent as `agent` (a run's `agent_user`, else the task's `[agent]
        user`): None for "root" (the image's user, root in Harbor images), AGENT_USER for "agent". A backend
        that always runs the agent as its own unprivileged user (local) answers None."""
        return AGENT_USER if agent == "agent" else None

    @abstractmethod
    async def create(self, spec: SandboxSpec) -> Sandbox:
        """Create and start a sandbox; raises SandboxError (with the reason) if it cannot. Nothing is left
        behind when creation fails."""

    async def create_grader(self, of: Sandbox) -> Sandbox:
        """A grader for sandbox `of`: a fresh sandbox of the same environment as built (`grader_spec`), in which
        grading runs once `of`'s state is copied in (`Sandbox.copy_state_to`); not yet in the task's initial
        state (`setup_environment`). This default creates it from `grader_spec(of.spec)`."""
        return await self.create(grader_spec(of.spec))

    @abstractmethod
    async def cleanup(self, run_label: str | None) -> int:
        """Remove every sandbox of run `run_label` (label `openforge.run`) that still exists — leftovers of a
        crash included — with its forwarder processes and temporary files. `None` removes every sandbox this
        backend manages. Returns how many sandboxes were removed."""

    @abstractmethod
    async def list(self, run_label: str | None = None) -> list[str]:
        """Names of existing sandboxes of run `run_label` (or all managed ones with None)."""

    async def missing_images(self, images: builtins.list[str]) -> builtins.list[str]:  # `list`: the method above
        """Which of `images` (as mapped, never pulled) this backend cannot start from, checked before a run
        starts so a missing image is reported once. The default: none that can be known in advance (the local
        backend ignores images; a cluster pulls them when a pod starts)."""
        return []

    async def setup_problem(self, images: builtins.list[str]) -> str | None:
        """Why this backend, as configured, cannot start the sandboxes of `images` (the tasks' images, as mapped,
        all present), or None: checked once before a run starts, after `missing_images`. The default: none."""
        return None

    async def close(self) -> None:  # noqa: B027 (optional: a backend without client resources keeps this no-op)
        """Release client resources (thread pool, connections). Does not destroy sandboxes."""
