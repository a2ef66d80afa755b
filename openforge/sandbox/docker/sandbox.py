"""One Docker container as a sandbox: exec (`execs.ContainerExec`), files through the archive API, status with
OOM kills, destroy; for grading, the agent's processes stopped (`processes.py`), the container's changes
(`docker diff`'s, read from its overlay layers where they are local: `overlay.py`) and path lookups through
the archive API, all out of band.

OOM: the kernel kills the biggest process of the container's memory cgroup — usually an exec'd command, not
PID 1 — and Docker only sets `State.OOMKilled` when PID 1 dies. `status()` therefore also counts the kills in
the container's memory cgroup (the kernel's `oom_kill` count, read from the host: `processes.container_oom_kills`),
or where that is not visible here, the daemon's `oom` events for the container (which crun's containers never
get).
"""

from __future__ import annotations

import asyncio
import tarfile
import tempfile
import threading
import time
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, Literal

from ..archive import copy_in_target, extract_archive, make_tar
from ..base import (
    DEFAULT_OUTPUT_CAP,
    ExecResult,
    PathChange,
    PathKind,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    await_worker,
    command_argv,
)
from ..state import StateArchive, StateTooLargeError
from .bridge import stop_process
from .client import docker_errors, infra_error, stat_header_kind
from .execs import ContainerExec
from .overlay import OverlayLayers, RedirectedDirectoryError, overlay_changes
from .processes import container_oom_kills, stop_container_processes

if TYPE_CHECKING:
    from .provider import DockerProvider

__all__ = ["DockerSandbox"]

MAX_SYMLINK_HOPS = 40  # as Linux's ELOOP limit
DIFF_KINDS: dict[int, Literal["added", "changed", "deleted"]] = {0: "changed", 1: "added", 2: "deleted"}
# Files the runtime itself adds to every container: not the agent's changes.
RUNTIME_FILES = ("/.dockerenv", "/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/etc/mtab")


class DockerSandbox(Sandbox):
    def __init__(
        self,
        provider: DockerProvider,
        spec: SandboxSpec,
        container_id: str,
        init_pid: int,
        created_at: float,
        forwarder: asyncio.subprocess.Process | None,
        image_id: str = "",
    ):
        self._p = provider
        self.spec = spec
        self.id = container_id
        self.name = spec.name
        self.init_pid = init_pid
        self.created_at = created_at
        self._forwarder = forwarder
        #: The id of the image the container was made from (its grader is made from the same).
        self.image_id = image_id
        self.proxy_url = f"http://127.0.0.1:{spec.proxy_port}" if forwarder is not None else None
        self._destroyed = False
        self._destroy_lock = asyncio.Lock()
        self._execs = ContainerExec(provider.conn, container_id, spec.name, init_pid, spec.user)

    def __repr__(self) -> str:
        return f"DockerSandbox(name={self.name!r}, id={self.id[:12]})"

    @property
    def forwarder_pid(self) -> int | None:
        return self._forwarder.pid if self._forwarder is not None else None

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
        self._check()
        argv = command_argv(cmd)
        cancel = threading.Event()
        return await await_worker(
            self._p.pool.submit(
                self._execs.run, argv, float(timeout_s), env, workdir, user, stdin, int(output_cap), cancel
            ),
            cancel,
        )

    # -- files ---------------------------------------------------------------------------------------------

    async def copy_in(self, src: Path, dest: str, *, owner: str | None = None) -> None:
        self._check()
        src, dest_p, uid, gid, chown_name = copy_in_target(src, dest, owner)
        await self._p.pool.submit(self._copy_in_blocking, src, dest_p, uid, gid)
        if chown_name is not None:
            await self._chown_copied(chown_name, dest_p)

    def _copy_in_blocking(self, src: Path, dest: PurePosixPath, uid: int, gid: int) -> None:
        import docker.errors

        data = make_tar(src, dest.name, uid, gid)
        parent = str(dest.parent)
        api = self._p.conn.api
        try:
            try:
                api.put_archive(self.id, parent, data)
            except docker.errors.NotFound:
                r = api.exec_create(self.id, ["mkdir", "-p", parent], user="0")
                api.exec_start(r["Id"])
                api.put_archive(self.id, parent, data)
        except docker.errors.NotFound as e:
            raise infra_error(f"copy into {self.name}:{dest} failed", e) from e
        except docker_errors() as e:
            raise infra_error(f"copy into {self.name}:{dest} failed", e) from e

    async def copy_out(self, src: str, dest: Path) -> None:
        self._check()
        await self._p.pool.submit(self._copy_out_blocking, src, Path(dest))

    def _get_archive(self, src: str, max_bytes: int | None = None) -> tuple[Any, dict] | None:
        import docker.errors

        try:
            stream, st = self._p.conn.api.get_archive(self.id, src)
        except docker.errors.NotFound:
            # both "no such file" and "no such container" are 404s: tell them apart
            try:
                self._p.conn.api.inspect_container(self.id)
            except docker.errors.NotFound as e:
                raise SandboxError(f"sandbox {self.name}: the container is gone") from e
            return None
        except docker_errors() as e:
            raise infra_error(f"reading {src} from {self.name} failed", e) from e
        tmp = tempfile.SpooledTemporaryFile(max_size=32 << 20)
        total = 0
        for chunk in stream:
            total += len(chunk)
            if max_bytes is not None and total > max_bytes + (1 << 20):
                tmp.close()
                raise ValueError(f"{src} in {self.name} is larger than {max_bytes} bytes")
            tmp.write(chunk)
        tmp.seek(0)
        return tmp, st

    def _copy_out_blocking(self, src: str, dest: Path) -> None:
        got = self._get_archive(src)
        if got is None:
            raise FileNotFoundError(f"{self.name}:{src}")
        tmp, st = got
        with tmp, tarfile.open(fileobj=tmp, mode="r|*") as tf:
            extract_archive(tf, dest, is_dir=bool(int(st.get("mode", 0)) & (1 << 31)))

    async def read_file(self, path: str, *, max_bytes: int = 16 << 20) -> bytes | None:
        self._check()
        return await self._p.pool.submit(self._read_file_blocking, path, max_bytes)

    def _read_file_blocking(self, path: str, max_bytes: int, hops: int = 0) -> bytes | None:
        got = self._get_archive(path, max_bytes)
        if got is None:
            return None
        tmp, st = got
        if int(st.get("mode", 0)) & (1 << 31):
            tmp.close()
            raise IsADirectoryError(f"{self.name}:{path}")
        with tmp, tarfile.open(fileobj=tmp, mode="r|*") as tf:
            for m in tf:
                if m.issym() or m.islnk():
                    # get_archive of a symlink gives the link itself: resolve by reading its target, as the
                    # kernel would, at most MAX_SYMLINK_HOPS times (a loop is an error, not a recursion)
                    if hops >= MAX_SYMLINK_HOPS:
                        raise ValueError(f"{path} in {self.name}: too many levels of symbolic links")
                    target = m.linkname if m.linkname.startswith("/") else str(PurePosixPath(path).parent / m.linkname)
                    return self._read_file_blocking(target, max_bytes, hops + 1)
                if not m.isfile():
                    return None
                if m.size > max_bytes:
                    raise ValueError(f"{path} in {self.name} is {m.size} bytes, more than {max_bytes}")
                f = tf.extractfile(m)
                return f.read() if f is not None else b""
        return None

    # -- grading support, out of band ----------------------------------------------------------------------

    async def export_state(self, roots: list[str], archive: StateArchive) -> None:
        """Each root through the daemon's archive API (out of band: no program of the container runs; the last
        component of a path is not followed, a link there comes as the link)."""
        self._check()
        await self._p.pool.submit(self._export_blocking, roots, archive)

    def _export_blocking(self, roots: list[str], archive: StateArchive) -> None:
        for root in roots:
            try:
                got = self._get_archive(root, archive.max_bytes)
            except ValueError as e:
                raise StateTooLargeError(archive.max_bytes) from e
            if got is None:
                continue  # not there: the grader's copy is removed, as the agent left it
            tmp, _ = got
            p = PurePosixPath(root)
            with tmp, tarfile.open(fileobj=tmp, mode="r|*") as tf:
                archive.add(tf, rename=(p.name, str(p.relative_to("/"))))

    async def import_state(self, archive: IO[bytes]) -> None:
        """Extracted by the daemon at `/` (owners and modes from the archive)."""
        self._check()
        await self._p.pool.submit(self._import_blocking, archive)

    def _import_blocking(self, archive: IO[bytes]) -> None:
        try:
            self._p.conn.api.put_archive(self.id, "/", archive)
        except docker_errors() as e:
            raise infra_error(f"copying the state into {self.name} failed", e) from e

    async def stop_agent_processes(self) -> None:
        """Freeze the container, SIGKILL every process but its init and keep-alive from the host, thaw, until
        none is left (`processes.stop_container_processes`); in band (as the base class does, sparing the
        keep-alive) where the daemon's pids are not visible from here."""
        self._check()
        await self._p.pool.submit(
            stop_container_processes, self._p.conn, self.id, self.name, self.init_pid, self._p.init
        )

    async def changed_paths(self) -> list[PathChange]:
        """`docker diff` against the image, minus what the runtime adds (mount points with what is below and
        the directories above them, its init binary, /etc/hosts and the like)."""
        self._check()
        rows = await self._p.pool.submit(self._diff_blocking)
        mounts = [m.target.rstrip("/") or "/" for m in self.spec.mounts]
        out = []
        for row in rows or []:
            path, code = row.get("Path", ""), row.get("Kind")
            kind = DIFF_KINDS.get(code) if isinstance(code, int) else None
            if not path or kind is None or path in RUNTIME_FILES:
                continue
            if self._p.init and path == "/usr/sbin/docker-init":
                continue
            if any(path == t or path.startswith(t + "/") or t.startswith(path.rstrip("/") + "/") for t in mounts):
                continue
            out.append(PathChange(path=path, kind=kind))
        return out

    def _diff_blocking(self) -> list[dict]:
        """Read from the container's overlay layers here where they can be (`overlay.py`: milliseconds against
        the daemon's ~0.45 s of CPU), else asked of the daemon."""
        try:
            layers = OverlayLayers.of(self._p.conn.api.inspect_container(self.id))
            if layers is not None:
                try:
                    return overlay_changes(layers)
                except (OSError, RedirectedDirectoryError):
                    pass  # a layer went away or a renamed directory: the daemon's own way below
            return self._p.conn.api.diff(self.id) or []
        except docker_errors() as e:
            raise infra_error(f"cannot list the changes of sandbox {self.name}", e) from e

    async def path_kinds(self, paths: list[str]) -> dict[str, PathKind]:
        """Asked of the daemon (a HEAD of the archive API per path: the daemon stats it in the container's root
        file system, not following the last component, and says what it is in a header), never of a program
        in the container."""
        self._check()
        return await self._p.pool.submit(self._kinds_blocking, list(paths))

    def _kinds_blocking(self, paths: list[str]) -> dict[str, PathKind]:
        api = self._p.conn.api
        url = f"{api.base_url}/v{api.api_version}/containers/{self.id}/archive"
        found: dict[str, PathKind] = {}
        for p in paths:
            try:
                res = api.head(url, params={"path": p})
            except docker_errors() as e:
                raise infra_error(f"cannot look up {p} in sandbox {self.name}", e) from e
            if res.status_code == 200:
                found[p] = stat_header_kind(res.headers.get("X-Docker-Container-Path-Stat", ""))
            elif res.status_code != 404:
                raise SandboxError(f"looking up {p} in sandbox {self.name}: HTTP {res.status_code}")
        return found

    # -- status / destroy ----------------------------------------------------------------------------------

    async def status(self) -> SandboxStatus:
        if self._destroyed:
            return SandboxStatus(alive=False, reason="destroyed")
        return await self._p.pool.submit(self._status_blocking)

    def _status_blocking(self) -> SandboxStatus:
        import docker.errors

        api = self._p.conn.api
        try:
            info = api.inspect_container(self.id)
        except docker.errors.NotFound:
            return SandboxStatus(alive=False, reason="the container was removed")
        except docker_errors() as e:
            raise infra_error(f"cannot inspect sandbox {self.name}", e) from e
        state = info.get("State", {})
        ooms = self._oom_kills()
        oom = bool(state.get("OOMKilled")) or ooms > 0
        running = bool(state.get("Running")) and not state.get("Paused") and not state.get("Restarting")
        fwd_exit = self._forwarder.returncode if self._forwarder is not None else None
        fwd_dead = fwd_exit is not None
        if running and not fwd_dead:
            reason = "running"
            if ooms:
                reason += f"; the OOM killer killed a process in it ({ooms}x, memory limit {self.spec.memory_mb} MiB)"
            return SandboxStatus(alive=True, oom_killed=oom, reason=reason)
        if running and fwd_dead:
            return SandboxStatus(alive=False, oom_killed=oom, reason=f"the proxy forwarder exited (code {fwd_exit})")
        code = state.get("ExitCode")
        reason = f"container {state.get('Status', 'stopped')} with exit code {code}"
        if state.get("OOMKilled"):
            reason += " (OOM killed)"
        if state.get("Error"):
            reason += f": {state['Error']}"
        return SandboxStatus(alive=False, oom_killed=oom, exit_code=code, reason=reason)

    def _oom_kills(self) -> int:
        """Processes the OOM killer killed in the container: the kernel's count where its cgroup is visible here
        (a file read), else the daemon's `oom` events."""
        kills = container_oom_kills(self.id)
        if kills is not None:
            return kills
        api = self._p.conn.api
        try:
            since = int(self.created_at) - 1
            # up to now, to the nanosecond: the daemon streams until `until` has passed, so a whole second rounded
            # up held every episode's end ~0.9 s (an OOM kill that matters happened before this call)
            until = f"{time.time():.9f}"
            events = api.events(
                since=since,
                until=until,
                decode=True,
                filters={"container": self.id, "event": "oom", "type": "container"},
            )
            try:
                return sum(1 for _ in events)
            finally:
                try:
                    events.close()
                except Exception:
                    pass
        except docker_errors():
            return 0

    async def destroy(self) -> None:
        async with self._destroy_lock:
            if self._destroyed:
                return
            self._destroyed = True
            await stop_process(self._forwarder)
            await self._p.pool.submit(self._p.remove_container, self.id)
            self._p.forget(self.id)
