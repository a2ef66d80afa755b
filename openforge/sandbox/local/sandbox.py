"""One local sandbox: a root directory of its own (`<root>/<name>/fs`, persisting across commands), every
command run by bubblewrap (`bwrap.Bwrap`) in fresh namespaces through the launcher (`forwarder.py`), which starts
the proxy relay as root and then drops to the command's user; files copied in and out as tar, extracted inside
the sandbox so its own symlinks cannot redirect a host-side write."""

from __future__ import annotations

import asyncio
import io
import os
import pwd
import shutil
import signal
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING

from openforge.tasks.model import Task

from ..archive import copy_in_target, extract_archive, make_tar
from ..base import (
    DEFAULT_OUTPUT_CAP,
    ExecResult,
    PathChange,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    command_argv,
)
from ..common import FORWARDER_PY, KILL_GRACE_S, append_capped
from ..filesnap import Snapshot, diff_snapshots
from ..state import ByteSink, CappedSink, StateArchive, StateTooLargeError
from .bwrap import RESERVED_TOPS, SYSTEM_RO, Bwrap, make_links
from .cgroups import Cgroup
from .changes import host_snapshot
from .replay import replay_dockerfile
from .users import is_root

if TYPE_CHECKING:
    from .provider import LocalProvider

__all__ = ["BASE_PATH", "RUN_DIR", "LocalSandbox", "remove_sandbox_dir"]

RUN_DIR = "/run/openforge"
# What the backend's own file operations (copy in/out, read_file, chown; fixed commands, never the agent's or a
# task's) keep as root: enough to read and write any file of the sandbox, nothing else (no mount, mknod, ...).
# Every `exec` — the agent's, the verifier's, a task's RUN step, `user="root"` included — keeps none.
FILE_CAPS = "chown,dac_override,dac_read_search,fowner,fsetid"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class LocalSandbox(Sandbox):
    def __init__(
        self, provider: LocalProvider, spec: SandboxSpec, directory: Path, cgroup: Cgroup, agent: tuple[int, int, str]
    ):
        self._p = provider
        self.spec = spec
        self.name = spec.name
        self.id = spec.name
        self.dir = directory
        self.fs = directory / "fs"
        self._cg = cgroup
        self._agent_uid, self._agent_gid, self._agent_home = agent
        self.workdir = spec.workdir or "/app"
        if spec.proxy_uds is not None:
            self.proxy_url: str | None = f"http://127.0.0.1:{spec.proxy_port}"
        elif spec.proxy_tcp is not None:
            self.proxy_url = f"http://{spec.proxy_tcp}"
        else:
            self.proxy_url = None
        self._procs: set[asyncio.subprocess.Process] = set()
        self._destroyed = False
        self._baseline = self._snapshot()  # `changed_paths` compares with this (the state at creation)

    def __repr__(self) -> str:
        return f"LocalSandbox(name={self.name!r}, dir={str(self.dir)!r})"

    @property
    def limits(self) -> str:
        """How limits are enforced: 'cgroup v1', 'cgroup v2' or 'rlimit'."""
        return f"cgroup v{self._cg.version}" if self._cg.ok else "rlimit"

    def _check(self) -> None:
        super()._check()
        if not self.fs.is_dir():
            raise SandboxError(f"sandbox {self.name}: its directory {self.dir} is gone")

    # -- command line --------------------------------------------------------------------------------------

    def _resolve_user(self, user: str | None) -> tuple[int, int, str, str]:
        """(uid, gid, home, name) for an exec."""
        u = user if user is not None else self.spec.user
        if u is None:
            return self._agent_uid, self._agent_gid, self._agent_home, self._p.agent_user
        if u in ("root", "0", "0:0"):
            return 0, 0, "/root", "root"
        a, _, b = u.partition(":")
        if a.isdigit():
            uid = int(a)
            gid = int(b) if b.isdigit() else uid
            try:
                pw = pwd.getpwuid(uid)
                return uid, gid, pw.pw_dir, pw.pw_name
            except KeyError:
                return uid, gid, "/tmp", str(uid)
        try:
            pw = pwd.getpwnam(a)
        except KeyError as e:
            raise SandboxError(f"sandbox {self.name}: no user {a!r} on this machine") from e
        return pw.pw_uid, (int(b) if b.isdigit() else pw.pw_gid), pw.pw_dir, pw.pw_name

    def _bwrap_argv(
        self, argv: list[str], *, workdir: str, env: dict[str, str], uid: int, gid: int, keep_caps: str = ""
    ) -> list[str]:
        p = self._p
        # The sandbox's own root (persists across execs: a directory made anywhere stays), then the host's
        # system directories read-only on top of it.
        b = (
            Bwrap(p.bwrap)
            .namespaces(share_network=self.spec.proxy_tcp is not None, hostname=self.name[:63])
            .root(self.fs)
            .system(existing_root=self.fs)
        )
        if p.python_prefix is not None:
            b.bind(p.python_prefix, p.python_prefix)
        b.tmpfs("/run").dir(RUN_DIR).bind(FORWARDER_PY, f"{RUN_DIR}/forwarder.py")
        if self.spec.proxy_uds is not None:
            b.bind(Path(self.spec.proxy_uds).resolve(), f"{RUN_DIR}/proxy.sock", read_only=False)
        made: set[str] = set()
        for m in self.spec.mounts:
            # bwrap would create missing parents of a mount point as 0700 root: make them 0755 first
            parents = list(PurePosixPath(m.target).parents)[:-1]  # without "/"
            for parent in reversed(parents):
                if parent.parts[1] in RESERVED_TOPS or str(parent) in made or (self.fs / str(parent)[1:]).is_dir():
                    continue
                made.add(str(parent))
                b.dir(str(parent), perms="0755")
            b.bind(Path(m.source).resolve(), m.target, read_only=m.read_only)
        # The launcher starts as root (so the relay it forks cannot be killed by the agent), then switches user.
        launcher = [p.python, "-I", f"{RUN_DIR}/forwarder.py"]
        if self.spec.proxy_uds is not None:
            launcher += ["--listen", f"127.0.0.1:{self.spec.proxy_port}", "--uds", f"{RUN_DIR}/proxy.sock"]
        if is_root():
            launcher += ["--user", f"{uid}:{gid}"]
        if keep_caps and uid == 0:
            launcher += ["--keep-caps", keep_caps]
        if not self._cg.ok:
            if uid != 0:
                launcher += ["--nproc", str(self.spec.pids)]
            if p.rlimit_memory:
                launcher += ["--as-bytes", str(self.spec.memory_mb * 1024 * 1024)]
        return b.chdir(workdir).environment(env).command([*launcher, "--", *argv])

    # -- exec ----------------------------------------------------------------------------------------------

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
        code, out, err, timed_out, truncated, dur = await self._run(
            cmd, timeout_s=timeout_s, env=env, workdir=workdir, user=user, stdin=stdin, output_cap=output_cap
        )
        return ExecResult(
            exit_code=code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            truncated=truncated,
            duration_s=round(dur, 4),
        )

    async def _run(
        self,
        cmd: list[str] | str,
        *,
        timeout_s: float,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        stdin: bytes | IO[bytes] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        keep_caps: str = "",
        sink: ByteSink | None = None,
    ) -> tuple[int, bytes, bytes, bool, bool, float]:
        """One command in the sandbox. `keep_caps`: only for the backend's own file operations (FILE_CAPS);
        `stdin`: bytes, or a real file read directly; `sink`: where stdout goes instead of the result."""
        self._check()
        argv = command_argv(cmd)
        uid, gid, home, uname = self._resolve_user(user)
        full_env = {"PATH": BASE_PATH, "LANG": "C.UTF-8", "HOME": home, "USER": uname, "LOGNAME": uname}
        full_env.update(self.spec.env)
        full_env.update(env or {})
        make_links(self.fs)  # the system links as the host has them, whatever a command before did
        bargv = self._bwrap_argv(
            argv, workdir=workdir or self.workdir, env=full_env, uid=uid, gid=gid, keep_caps=keep_caps
        )
        cg = self._cg
        start = time.monotonic()
        spawning = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *bargv,
                stdin=asyncio.subprocess.DEVNULL
                if stdin is None
                else (asyncio.subprocess.PIPE if isinstance(stdin, bytes) else stdin),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=cg.attach_self if cg.ok else None,
            )
        )
        try:
            # Shielded: asyncio's own clean-up of a start cancelled half-way waits for every holder of the
            # output pipes to close them, and bwrap's pid 1, in its own session, can outlive a killed bwrap
            # that had not yet armed --die-with-parent: a cancelled command hung its caller for good.
            proc = await asyncio.shield(spawning)
        except asyncio.CancelledError:
            spawning.add_done_callback(self._kill_started)
            raise
        except OSError as e:
            raise SandboxError(f"sandbox {self.name}: cannot start bubblewrap: {e}") from e
        self._procs.add(proc)
        assert proc.stdout is not None and proc.stderr is not None  # opened with PIPE
        bufs = [bytearray(), bytearray()]
        trunc = [False]

        async def drain(stream: asyncio.StreamReader, buf: bytearray, to: ByteSink | None) -> None:
            while True:
                chunk = await stream.read(1 << 16)
                if not chunk:
                    return
                if to is not None:
                    to.write(chunk)
                else:
                    trunc[0] |= append_capped(buf, chunk, output_cap)

        async def feed() -> None:
            if not isinstance(stdin, bytes) or proc.stdin is None:
                return
            try:
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                try:
                    proc.stdin.close()
                except Exception:
                    pass

        readers = asyncio.gather(drain(proc.stdout, bufs[0], sink), drain(proc.stderr, bufs[1], None), feed())
        timed_out = False
        try:
            try:
                await asyncio.wait_for(asyncio.shield(readers), timeout=max(0.0, timeout_s))
                await asyncio.wait_for(proc.wait(), timeout=max(0.1, timeout_s - (time.monotonic() - start)))
            except TimeoutError:
                timed_out = True
                self._kill(proc)
                try:
                    await asyncio.wait_for(asyncio.shield(readers), KILL_GRACE_S)
                except TimeoutError:
                    readers.cancel()
                try:
                    await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            self._kill(proc)
            readers.cancel()
            raise
        finally:
            self._procs.discard(proc)
            readers.add_done_callback(lambda f: f.cancelled() or f.exception())  # no "never retrieved" noise
        rc = proc.returncode
        if rc is None:
            code = -1
        elif rc < 0:
            code = 128 - rc
        else:
            code = rc
        return code, bytes(bufs[0]), bytes(bufs[1]), timed_out, trunc[0], time.monotonic() - start

    def _kill_started(self, spawning: asyncio.Future[asyncio.subprocess.Process]) -> None:
        """A command whose caller was cancelled while it started: killed once started (its pipes are left to
        close when its last process is gone: the sandbox's destroy kills whatever is left)."""
        if not spawning.cancelled() and spawning.exception() is None:
            self._kill(spawning.result())

    @staticmethod
    def _kill(proc: asyncio.subprocess.Process) -> None:
        # bwrap leads its own process group; killing it makes its pid-1 die (--die-with-parent), and with it
        # every process of the exec's pid namespace.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    # -- files ---------------------------------------------------------------------------------------------

    async def _chown_copied(self, owner: str, path: PurePosixPath) -> None:
        await self.chown_tree(owner, str(path))

    async def _file_op(
        self,
        argv: list[str],
        what: str,
        *,
        stdin: bytes | IO[bytes] | None = None,
        sink: ByteSink | None = None,
        timeout_s: float = 300,
    ) -> None:
        """One of the backend's own file operations (fixed commands): as root keeping FILE_CAPS, from `/`;
        SandboxError saying `what` failed when it does."""
        code, _, err, timed_out, _, _ = await self._run(
            argv, timeout_s=timeout_s, user="root", workdir="/", stdin=stdin, sink=sink, keep_caps=FILE_CAPS
        )
        if code != 0 or timed_out:
            raise SandboxError(f"{what} failed in {self.name}: {err.decode(errors='replace').strip()[-500:]}")

    async def chown_tree(self, owner: str, path: str) -> None:
        """Give `path` (recursively, links not followed) to `owner`: the backend's own operation, the one
        privileged step of replaying a task's environment (its workdir handed to the agent's user), since
        every `exec` runs without capabilities. A path that does not exist is left alone."""
        script = '[ -e "$2" ] || [ -L "$2" ] || exit 0; exec chown -hR -- "$1" "$2"'
        await self._file_op(["sh", "-c", script, "sh", owner, path], f"chown {owner} {path}")

    def _check_writable(self, dest: PurePosixPath) -> None:
        """Refuse a copy into the host's read-only system directories or a read-only mount (`dest` absolute)."""
        top = dest.parts[1]
        if top in RESERVED_TOPS:
            raise SandboxError(f"sandbox {self.name}: /{top} is read-only (the host's) in the local sandbox")
        for m in self.spec.mounts:
            t = PurePosixPath(m.target)
            if m.read_only and (dest == t or t in dest.parents):
                raise SandboxError(f"sandbox {self.name}: {dest} is under the read-only mount {t}")

    async def copy_in(self, src: Path, dest: str, *, owner: str | None = None) -> None:
        self._check()
        src, d, uid, gid, chown = copy_in_target(src, dest, owner)
        self._check_writable(d)
        data = await asyncio.to_thread(make_tar, src, d.name, uid, gid)
        # Extract inside the sandbox (as root), so in-sandbox paths, mounts and symlinks mean what they mean
        # there — a symlink planted by the agent cannot redirect a host-side write.
        script = 'mkdir -p -- "$1" && exec tar --numeric-owner -xpf - -C "$1"'
        await self._file_op(["sh", "-c", script, "sh", str(d.parent)], f"copy into {dest}", stdin=data)
        if chown is not None:
            await self._chown_copied(chown, d)

    async def copy_out(self, src: str, dest: Path) -> None:
        self._check()
        s = PurePosixPath(src)
        script = (
            '[ -e "$1" ] || [ -L "$1" ] || exit 44; cd -- "$(dirname -- "$1")" && '
            'exec tar --numeric-owner -cf - -- "$(basename -- "$1")"'
        )
        code, out, err, timed_out, truncated, _ = await self._run(
            ["sh", "-c", script, "sh", str(s)],
            timeout_s=600,
            user="root",
            workdir="/",
            output_cap=1 << 40,
            keep_caps=FILE_CAPS,
        )
        if code == 44:
            raise FileNotFoundError(f"{self.name}:{src}")
        if code != 0 or timed_out:
            raise SandboxError(f"copy out of {self.name}:{src} failed: {err.decode(errors='replace').strip()}")

        def extract() -> None:
            with tarfile.open(fileobj=io.BytesIO(out), mode="r:") as tf:
                members = tf.getmembers()
                is_dir = bool(members) and members[0].isdir()
            with tarfile.open(fileobj=io.BytesIO(out), mode="r|") as tf:
                extract_archive(tf, Path(dest), is_dir=is_dir)

        await asyncio.to_thread(extract)

    async def read_file(self, path: str, *, max_bytes: int = 16 << 20) -> bytes | None:
        self._check()
        script = '[ -d "$1" ] && exit 43; [ -e "$1" ] || exit 44; exec cat -- "$1"'
        code, out, err, timed_out, truncated, _ = await self._run(
            ["sh", "-c", script, "sh", path],
            timeout_s=120,
            user="root",
            workdir="/",
            output_cap=max_bytes,
            keep_caps=FILE_CAPS,
        )
        if code == 44:
            return None
        if code == 43:
            raise IsADirectoryError(f"{self.name}:{path}")
        if truncated:
            raise ValueError(f"{path} in {self.name} is larger than {max_bytes} bytes")
        if code != 0 or timed_out:
            raise SandboxError(f"reading {self.name}:{path} failed: {err.decode(errors='replace').strip()}")
        return out

    # -- graders: the state copied with the host's tar, in the sandbox's view ------------------------------

    async def export_state(self, roots: list[str], archive: StateArchive) -> None:
        """The roots archived by the host's `tar` (read-only here, so untouched) inside the sandbox's view (its
        links mean what they mean there, never the host's). Roots in the host's read-only system directories
        are left out: they are the same, unchanged, in every local sandbox."""
        own = [r.lstrip("/") for r in roots if PurePosixPath(r).parts[1] not in RESERVED_TOPS]
        script = 'cd / && for p; do [ -e "$p" ] || [ -L "$p" ] && printf "%s\\0" "$p"; done | tar --null -T - -cf -'
        with tempfile.TemporaryFile(prefix="openforge-state-") as tmp:
            sink = CappedSink(tmp, archive.max_bytes + (1 << 20))
            argv = ["sh", "-c", f"{script} --numeric-owner", "sh", *own]
            await self._file_op(argv, "archiving the state", sink=sink, timeout_s=600)
            if sink.over:
                raise StateTooLargeError(archive.max_bytes)
            await asyncio.to_thread(archive.add_file, tmp)

    removes_by_exec = False  # root commands here have no capabilities; the backend's file operations do
    keeps_services = False  # each command has its own pid namespace: what it leaves running ends with it

    async def remove_paths(self, paths: list[str]) -> None:
        """As the backend's own file operation (root keeps FILE_CAPS: the work area is the agent user's)."""
        await self._file_op(["rm", "-rf", "--", *paths], f"removing {', '.join(paths)}")

    async def import_state(self, archive: IO[bytes]) -> None:
        argv = ["tar", "--numeric-owner", "-xpf", "-", "-C", "/"]
        await self._file_op(argv, "copying the state in", stdin=archive, timeout_s=600)

    # -- status / destroy ----------------------------------------------------------------------------------

    async def stop_agent_processes(self) -> None:
        """Out of band, from the host: every exec still running is killed (its process group: bubblewrap, whose
        pid namespace dies with it), and every process left in the sandbox's cgroup. Each exec has its own pid
        namespace, so normally nothing is left once the harness has exited; this makes sure."""
        self._check()
        for proc in list(self._procs):
            self._kill(proc)
        if self._cg.ok:
            await asyncio.to_thread(self._cg.kill_all)
            if self._cg.pids():
                raise SandboxError(f"sandbox {self.name}: processes survive in its cgroup after SIGKILL")

    async def setup_environment(self, task: Task, *, timeout_s: float | None = None) -> None:
        """This backend builds no image: the task's Dockerfile is replayed here (`replay.py`), its work
        directory given to the agent user."""
        await replay_dockerfile(self, task, owner=self._p.agent_user, timeout_s=timeout_s)

    async def mark_initial_state(self) -> None:
        """The task's initial state is in place (its Dockerfile replayed): `changed_paths` compares with now."""
        self._check()
        self._baseline = await asyncio.to_thread(self._snapshot)

    async def changed_paths(self) -> list[PathChange]:
        """What changed since the sandbox was created (or since `mark_initial_state`), read from the host
        (`changes.host_snapshot`): the agent's commands are not asked."""
        self._check()
        return diff_snapshots(self._baseline, await asyncio.to_thread(self._snapshot))

    def _snapshot(self) -> Snapshot:
        skip = {f"/{top}" for top in SYSTEM_RO} | {"/proc", "/dev", "/run", "/sys"}
        skip |= {m.target for m in self.spec.mounts}
        return host_snapshot(self.fs, skip)

    async def status(self) -> SandboxStatus:
        if self._destroyed:
            return SandboxStatus(alive=False, reason="destroyed")
        if not self.fs.is_dir():
            return SandboxStatus(alive=False, reason=f"its directory {self.dir} is gone")
        ooms = self._cg.oom_kills() if self._cg.ok else 0
        if self.spec.proxy_uds is not None and not Path(self.spec.proxy_uds).exists():
            return SandboxStatus(
                alive=False, oom_killed=ooms > 0, reason=f"the proxy socket {self.spec.proxy_uds} is gone"
            )
        reason = "ready"
        if ooms:
            reason += f"; the OOM killer killed a process in it ({ooms}x, memory limit {self.spec.memory_mb} MiB)"
        return SandboxStatus(alive=True, oom_killed=ooms > 0, reason=reason)

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        for proc in list(self._procs):
            self._kill(proc)
        await asyncio.to_thread(remove_sandbox_dir, self.dir, self._cg)
        self._p.forget(self.name)


def remove_sandbox_dir(directory: Path, cg: Cgroup) -> None:
    """Remove a sandbox's directory, and its cgroup with every process in it."""
    if cg.ok:
        cg.kill_all()
        cg.remove()
    shutil.rmtree(directory, ignore_errors=True)
    if directory.exists():  # files made read-only by the agent: make writable and retry
        for dirpath, dirnames, _ in os.walk(directory):
            for d in dirnames:
                try:
                    os.chmod(os.path.join(dirpath, d), 0o700)
                except OSError:
                    pass
        shutil.rmtree(directory, ignore_errors=True)
