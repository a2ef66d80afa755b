"""Local sandboxes: a process sandbox in a fresh directory, for machines without Docker.

Every command runs under **bubblewrap** (`bwrap`, Debian package `bubblewrap`) in fresh mount, pid, ipc and uts
namespaces (and a fresh network namespace unless `spec.proxy_tcp` is used), as an **unprivileged user**
(`openforge-agent`, created with `useradd` on first use when running as root; `spec.user` / `exec(user=)`
choose another, `"root"` for the verifier). The sandbox sees:

- the host's `/usr`, `/etc` and the `/bin`, `/sbin`, `/lib*` links, **read-only**;
- its own root file system everywhere else, kept in `<root>/<name>/fs/` on the host (owned by root, so only
  root in the sandbox creates top-level directories, as in a container) and persisting across commands: the
  working directory (`spec.workdir`, default `/app`, owned by the agent user), `/tmp`, `/home/<agent>`, `/root`,
  `/logs/verifier`, and whatever `copy_in` or a command writes (say `/tests`, `/srv`);
- `spec.mounts` at their targets (read-only unless said otherwise), fresh `/proc` and `/dev`.

So paths are the same as in a container (`/app`, `/tests`, `/logs/verifier/reward.txt`), and the task's
`tests/` and `solution/` — wherever they are on the host — are simply not there until grading copies the tests
in (`copy_in(tests, "/tests")`). The per-sandbox directory is root-only (0700) on the host.

Proxy: with `spec.proxy_uds`, the model API socket is bound into the sandbox and a relay (`forwarder.py`,
started inside as root before the command drops privileges, so the agent cannot kill it) listens on the
sandbox's own loopback `127.0.0.1:<proxy_port>`: `proxy_url` is `http://127.0.0.1:<proxy_port>`, and nothing
else on the network is reachable (a fresh network namespace has only `lo`). With `spec.proxy_tcp` instead
(`"127.0.0.1:8100"`), the sandbox shares the host's network and `proxy_url` is `http://<proxy_tcp>`.

Limits: when running as root with a writable cgroup hierarchy (v1 or v2), each sandbox gets its own cgroup —
memory (no swap on top), pids and CPU quota enforced by the kernel, and the OOM-kill counter feeds
`status().oom_killed`. Otherwise rlimits are the fallback: RLIMIT_NPROC (counted per user across all
sandboxes of that user) and, only with `rlimit_memory=True`, RLIMIT_AS (virtual memory, which breaks runtimes
that reserve large address spaces such as Node); CPU share is then not limited.

What the local sandbox does not isolate
---------------------------------------
- **The host's read-only system files**: everything under `/usr` and `/etc` is readable (world-readable files
  only, for the agent user) — installed software, configuration, `/etc/passwd`. Secrets must not live there.
- **Network with `proxy_tcp`**: the sandbox then shares the host's network namespace: every service on the
  host's loopback (the proxy's admin listener included, if it listens on TCP) and the outside network are
  reachable. Use `proxy_uds` (the default in the orchestrator) for loopback-only isolation.
- **The kernel**: one shared kernel, no seccomp filter beyond bubblewrap's defaults; a kernel exploit escapes.
- **Disk**: no quota; a sandbox can fill the disk holding `<root>`.
- **Without root**: no user switch (commands run as the calling user, so files that user can read on the
  bound system paths are readable), no cgroups (rlimits only), and bubblewrap needs unprivileged user
  namespaces.
- **Processes that escape the per-command pid namespace**: none can by construction, but each `exec` gets its
  own pid namespace, so a background process started by one exec does not survive it (unlike Docker).
- **Time**: `/proc` shows the host's uptime and load; the hostname is per sandbox.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

from ._archive import extract_archive, make_tar
from .base import (
    DEFAULT_OUTPUT_CAP,
    LABEL_MANAGED,
    LABEL_RUN,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    SandboxStatus,
    command_argv,
    label_value,
)

__all__ = ["LocalProvider", "LocalSandbox", "bwrap_available"]

FORWARDER_PY = Path(__file__).with_name("forwarder.py")
RUN_DIR = "/run/openforge"
SYSTEM_RO = ("usr", "etc")
SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
RESERVED_TOPS = set(SYSTEM_RO) | set(SYSTEM_LINKS) | {"proc", "dev", "run", "sys"}
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
META = "openforge-sandbox.json"
KILL_GRACE_S = 5.0


def _is_root() -> bool:
    return os.geteuid() == 0


def bwrap_available(bwrap: str = "bwrap") -> tuple[bool, str]:
    """Can bubblewrap create the namespaces the local sandbox needs here?"""
    exe = shutil.which(bwrap)
    if exe is None:
        return False, "bubblewrap is not installed (apt-get install bubblewrap)"
    args = [exe, "--ro-bind", "/usr", "/usr", *(_link_args()), "--proc", "/proc", "--dev", "/dev",
            "--unshare-pid", "--unshare-net", "--die-with-parent", "--", "/bin/true"]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"bubblewrap failed: {e}"
    if r.returncode != 0:
        return False, f"bubblewrap cannot create namespaces here: {r.stderr.strip()}"
    return True, "bubblewrap works"


def _link_args(existing: Path | None = None) -> list[str]:
    """bwrap arguments recreating the host's /bin, /lib, ... (symlinks into /usr on merged-/usr systems, else
    read-only binds). Symlinks already present in `existing` (a sandbox root, where they are made once at
    creation: bwrap 0.8 cannot re-create an existing symlink) are skipped."""
    out: list[str] = []
    for name in SYSTEM_LINKS:
        p = Path("/") / name
        if p.is_symlink():
            if existing is not None and (existing / name).is_symlink():
                continue
            out += ["--symlink", os.readlink(p), f"/{name}"]
        elif p.is_dir():
            out += ["--ro-bind", str(p), f"/{name}"]
    return out


def _make_links(fs: Path) -> None:
    for name in SYSTEM_LINKS:
        p = Path("/") / name
        if p.is_symlink() and not (fs / name).exists():
            os.symlink(os.readlink(p), fs / name)


# -- cgroups -------------------------------------------------------------------------------------------------

class _Cgroup:
    """One sandbox's cgroup(s): v1 (a directory per controller) or v2 (one directory). Best effort: `ok` is
    False when the hierarchy is not writable, and the sandbox falls back to rlimits."""

    def __init__(self, name: str):
        self.name = name
        self.dirs: dict[str, Path] = {}  # controller -> directory ("unified" for v2)
        self.version = 0
        self.error = ""

    @staticmethod
    def _own_paths() -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                _, ctrls, path = line.split(":", 2)
                for c in ctrls.split(",") if ctrls else [""]:
                    out[c] = path
        except OSError:
            pass
        return out

    def create(self, memory_mb: int, pids: int, cpus: float) -> bool:
        own = self._own_paths()
        base = Path("/sys/fs/cgroup")
        mem = memory_mb * 1024 * 1024
        try:
            if (base / "memory").is_dir() and (base / "pids").is_dir():  # v1
                self.version = 1
                for ctrl in ("memory", "pids", "cpu"):
                    root = base / ctrl
                    if not root.is_dir():
                        continue
                    parent = root / own.get(ctrl, "/").lstrip("/")
                    if not parent.is_dir():
                        parent = root
                    d = parent / "openforge" / self.name
                    d.mkdir(parents=True, exist_ok=True)
                    self.dirs[ctrl] = d
                m = self.dirs["memory"]
                (m / "memory.limit_in_bytes").write_text(str(mem))
                if (m / "memory.memsw.limit_in_bytes").exists():
                    (m / "memory.memsw.limit_in_bytes").write_text(str(mem))
                (self.dirs["pids"] / "pids.max").write_text(str(pids))
                if "cpu" in self.dirs:
                    (self.dirs["cpu"] / "cpu.cfs_period_us").write_text("100000")
                    (self.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(max(1000, int(cpus * 100000))))
                return True
            if (base / "cgroup.controllers").exists():  # v2
                self.version = 2
                parent = base / own.get("", "/").lstrip("/")
                top = parent / "openforge"
                top.mkdir(exist_ok=True)
                for p in (parent, top):
                    try:
                        (p / "cgroup.subtree_control").write_text("+memory +pids +cpu")
                    except OSError:
                        pass
                d = top / self.name
                d.mkdir(exist_ok=True)
                self.dirs["unified"] = d
                (d / "memory.max").write_text(str(mem))
                if (d / "memory.swap.max").exists():
                    (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(pids))
                if (d / "cpu.max").exists():
                    (d / "cpu.max").write_text(f"{max(1000, int(cpus * 100000))} 100000")
                return True
            self.error = "no cgroup hierarchy found"
        except OSError as e:
            self.error = f"cgroups not usable: {e}"
        self.remove()
        return False

    @property
    def ok(self) -> bool:
        return bool(self.dirs)

    def attach_self(self) -> None:
        """Called in the child between fork and exec (preexec_fn): move it into every controller's group."""
        pid = str(os.getpid())
        for d in self.dirs.values():
            with open(d / "cgroup.procs", "w") as f:
                f.write(pid)

    def oom_kills(self) -> int:
        try:
            if self.version == 1 and "memory" in self.dirs:
                text = (self.dirs["memory"] / "memory.oom_control").read_text()
            elif self.version == 2:
                text = (self.dirs["unified"] / "memory.events").read_text()
            else:
                return 0
        except OSError:
            return 0
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
        return 0

    def pids(self) -> list[int]:
        out: set[int] = set()
        for d in self.dirs.values():
            try:
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(out)

    def kill_all(self) -> None:
        for _ in range(10):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.05)

    def remove(self) -> None:
        for d in list(self.dirs.values()):
            for _ in range(20):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        self.dirs.clear()

    @classmethod
    def existing(cls, name: str) -> "_Cgroup":
        """The cgroup directories of a (possibly leftover) sandbox `name`, for cleanup."""
        cg = cls(name)
        own = cls._own_paths()
        base = Path("/sys/fs/cgroup")
        for ctrl in ("memory", "pids", "cpu"):
            for parent in (base / ctrl / own.get(ctrl, "/").lstrip("/"), base / ctrl):
                d = parent / "openforge" / name
                if d.is_dir():
                    cg.dirs[ctrl] = d
                    cg.version = 1
                    break
        d = base / own.get("", "/").lstrip("/") / "openforge" / name
        if (base / "cgroup.controllers").exists() and d.is_dir():
            cg.dirs["unified"] = d
            cg.version = 2
        return cg


# -- users ---------------------------------------------------------------------------------------------------


def _ensure_user(name: str) -> tuple[int, int, str]:
    """(uid, gid, home) of `name`, creating it (system user, own group, no login) when root and missing."""
    try:
        pw = pwd.getpwnam(name)
        return pw.pw_uid, pw.pw_gid, pw.pw_dir
    except KeyError:
        pass
    if not _is_root():
        raise SandboxError(f"user {name} does not exist and only root can create it")
    r = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", f"/home/{name}",
                        "--shell", "/bin/bash", name], capture_output=True, text=True)
    if r.returncode not in (0, 9):  # 9: exists (a concurrent creation)
        raise SandboxError(f"cannot create user {name}: {r.stderr.strip()}")
    pw = pwd.getpwnam(name)
    return pw.pw_uid, pw.pw_gid, pw.pw_dir


# -- the sandbox ---------------------------------------------------------------------------------------------

class LocalSandbox(Sandbox):
    def __init__(self, provider: "LocalProvider", spec: SandboxSpec, directory: Path, cgroup: _Cgroup,
                 agent: tuple[int, int, str]):
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

    def _bwrap_argv(self, argv: list[str], *, workdir: str, env: dict[str, str], uid: int, gid: int) -> list[str]:
        p = self._p
        a = [p.bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--unshare-cgroup-try", "--hostname", self.name[:63]]
        if self.spec.proxy_tcp is None:
            a.append("--unshare-net")
        # The sandbox's own root (persists across execs: a directory made anywhere stays), then the host's
        # system directories read-only on top of it.
        a += ["--bind", str(self.fs), "/"]
        for top in SYSTEM_RO:
            a += ["--ro-bind", f"/{top}", f"/{top}"]
        a += _link_args(existing=self.fs)
        if p.python_prefix is not None:
            a += ["--ro-bind", p.python_prefix, p.python_prefix]
        a += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/run", "--dir", RUN_DIR,
              "--ro-bind", str(FORWARDER_PY), f"{RUN_DIR}/forwarder.py"]
        if self.spec.proxy_uds is not None:
            a += ["--bind", str(Path(self.spec.proxy_uds).resolve()), f"{RUN_DIR}/proxy.sock"]
        made: set[str] = set()
        for m in self.spec.mounts:
            # bwrap would create missing parents of a mount point as 0700 root: make them 0755 first
            parents = list(PurePosixPath(m.target).parents)[:-1]  # without "/"
            for parent in reversed(parents):
                if parent.parts[1] in RESERVED_TOPS or str(parent) in made or (self.fs / str(parent)[1:]).is_dir():
                    continue
                made.add(str(parent))
                a += ["--perms", "0755", "--dir", str(parent)]
            a += ["--ro-bind" if m.read_only else "--bind", str(Path(m.source).resolve()), m.target]
        a += ["--chdir", workdir, "--clearenv"]
        for k, v in env.items():
            a += ["--setenv", k, v]
        a += ["--", p.python, "-I", f"{RUN_DIR}/forwarder.py"]
        if self.spec.proxy_uds is not None:
            a += ["--listen", f"127.0.0.1:{self.spec.proxy_port}", "--uds", f"{RUN_DIR}/proxy.sock"]
        if _is_root():
            a += ["--user", f"{uid}:{gid}"]
        if not self._cg.ok:
            if uid != 0:
                a += ["--nproc", str(self.spec.pids)]
            if p.rlimit_memory:
                a += ["--as-bytes", str(self.spec.memory_mb * 1024 * 1024)]
        a += ["--", *argv]
        return a

    # -- exec ----------------------------------------------------------------------------------------------

    async def exec(self, cmd: list[str] | str, *, timeout_s: float, env: dict[str, str] | None = None,
                   workdir: str | None = None, user: str | None = None, stdin: bytes | None = None,
                   output_cap: int = DEFAULT_OUTPUT_CAP) -> ExecResult:
        code, out, err, timed_out, truncated, dur = await self._run(
            cmd, timeout_s=timeout_s, env=env, workdir=workdir, user=user, stdin=stdin, output_cap=output_cap)
        return ExecResult(exit_code=code, stdout=out.decode("utf-8", "replace"),
                          stderr=err.decode("utf-8", "replace"), timed_out=timed_out, truncated=truncated,
                          duration_s=round(dur, 4))

    async def _run(self, cmd: list[str] | str, *, timeout_s: float, env: dict[str, str] | None = None,
                   workdir: str | None = None, user: str | None = None, stdin: bytes | None = None,
                   output_cap: int = DEFAULT_OUTPUT_CAP) -> tuple[int, bytes, bytes, bool, bool, float]:
        self._check()
        argv = command_argv(cmd)
        uid, gid, home, uname = self._resolve_user(user)
        full_env = {"PATH": BASE_PATH, "LANG": "C.UTF-8", "HOME": home, "USER": uname, "LOGNAME": uname}
        full_env.update(self.spec.env)
        full_env.update(env or {})
        bargv = self._bwrap_argv(argv, workdir=workdir or self.workdir, env=full_env, uid=uid, gid=gid)
        cg = self._cg
        start = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *bargv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
                preexec_fn=cg.attach_self if cg.ok else None)
        except OSError as e:
            raise SandboxError(f"sandbox {self.name}: cannot start bubblewrap: {e}") from e
        self._procs.add(proc)
        bufs = [bytearray(), bytearray()]
        trunc = [False]

        async def drain(stream: asyncio.StreamReader, buf: bytearray) -> None:
            while True:
                chunk = await stream.read(1 << 16)
                if not chunk:
                    return
                room = output_cap - len(buf)
                if len(chunk) > room:
                    trunc[0] = True
                    chunk = chunk[:max(0, room)]
                buf += chunk

        async def feed() -> None:
            if stdin is None or proc.stdin is None:
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

        readers = asyncio.gather(drain(proc.stdout, bufs[0]), drain(proc.stderr, bufs[1]), feed())
        timed_out = False
        try:
            try:
                await asyncio.wait_for(asyncio.shield(readers), timeout=max(0.0, timeout_s))
                await asyncio.wait_for(proc.wait(), timeout=max(0.1, timeout_s - (time.monotonic() - start)))
            except asyncio.TimeoutError:
                timed_out = True
                self._kill(proc)
                try:
                    await asyncio.wait_for(asyncio.shield(readers), KILL_GRACE_S)
                except asyncio.TimeoutError:
                    readers.cancel()
                try:
                    await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
                except asyncio.TimeoutError:
                    pass
        except asyncio.CancelledError:
            self._kill(proc)
            readers.cancel()
            raise
        finally:
            self._procs.discard(proc)
        rc = proc.returncode
        if rc is None:
            code = -1
        elif rc < 0:
            code = 128 - rc
        else:
            code = rc
        return code, bytes(bufs[0]), bytes(bufs[1]), timed_out, trunc[0], time.monotonic() - start

    @staticmethod
    def _kill(proc: asyncio.subprocess.Process) -> None:
        # bwrap leads its own process group; killing it makes its pid-1 die (--die-with-parent), and with it
        # every process of the exec's pid namespace.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    # -- files ---------------------------------------------------------------------------------------------

    def _check_writable(self, dest: PurePosixPath) -> None:
        if not dest.is_absolute() or dest == PurePosixPath("/"):
            raise ValueError(f"destination must be an absolute path other than /, got {str(dest)!r}")
        top = dest.parts[1]
        if top in RESERVED_TOPS:
            raise SandboxError(f"sandbox {self.name}: /{top} is read-only (the host's) in the local sandbox")
        for m in self.spec.mounts:
            t = PurePosixPath(m.target)
            if m.read_only and (dest == t or t in dest.parents):
                raise SandboxError(f"sandbox {self.name}: {dest} is under the read-only mount {t}")

    async def copy_in(self, src: Path, dest: str, *, owner: str | None = None) -> None:
        self._check()
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(src)
        d = PurePosixPath(dest)
        self._check_writable(d)
        uid = gid = 0
        chown: str | None = None
        if owner is not None:
            u, _, g = str(owner).partition(":")
            if u.isdigit() and (not g or g.isdigit()):
                uid, gid = int(u), int(g or u)
            else:
                chown = str(owner)
        data = await asyncio.to_thread(make_tar, src, d.name, uid, gid)
        # Extract inside the sandbox (as root), so in-sandbox paths, mounts and symlinks mean what they mean
        # there — a symlink planted by the agent cannot redirect a host-side write.
        script = 'mkdir -p -- "$1" && exec tar --numeric-owner -xpf - -C "$1"'
        code, _, err, timed_out, _, _ = await self._run(["sh", "-c", script, "sh", str(d.parent)], timeout_s=300,
                                                        user="root", stdin=data, workdir="/")
        if code != 0 or timed_out:
            raise SandboxError(f"copy into {self.name}:{dest} failed: {err.decode(errors='replace').strip()}")
        if chown is not None:
            r = await self.exec(["chown", "-R", chown, str(d)], timeout_s=60, user="root", workdir="/")
            if r.exit_code != 0:
                raise SandboxError(f"chown {chown} {d} failed in {self.name}: {r.stderr.strip()}")

    async def copy_out(self, src: str, dest: Path) -> None:
        self._check()
        s = PurePosixPath(src)
        script = ('[ -e "$1" ] || [ -L "$1" ] || exit 44; cd -- "$(dirname -- "$1")" && '
                  'exec tar --numeric-owner -cf - -- "$(basename -- "$1")"')
        code, out, err, timed_out, truncated, _ = await self._run(
            ["sh", "-c", script, "sh", str(s)], timeout_s=600, user="root", workdir="/", output_cap=1 << 40)
        if code == 44:
            raise FileNotFoundError(f"{self.name}:{src}")
        if code != 0 or timed_out:
            raise SandboxError(f"copy out of {self.name}:{src} failed: {err.decode(errors='replace').strip()}")

        def extract() -> None:
            import io
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
            ["sh", "-c", script, "sh", path], timeout_s=120, user="root", workdir="/", output_cap=max_bytes)
        if code == 44:
            return None
        if code == 43:
            raise IsADirectoryError(f"{self.name}:{path}")
        if truncated:
            raise ValueError(f"{path} in {self.name} is larger than {max_bytes} bytes")
        if code != 0 or timed_out:
            raise SandboxError(f"reading {self.name}:{path} failed: {err.decode(errors='replace').strip()}")
        return out

    # -- status / destroy ----------------------------------------------------------------------------------

    async def status(self) -> SandboxStatus:
        if self._destroyed:
            return SandboxStatus(alive=False, reason="destroyed")
        if not self.fs.is_dir():
            return SandboxStatus(alive=False, reason=f"its directory {self.dir} is gone")
        ooms = self._cg.oom_kills() if self._cg.ok else 0
        if self.spec.proxy_uds is not None and not Path(self.spec.proxy_uds).exists():
            return SandboxStatus(alive=False, oom_killed=ooms > 0,
                                 reason=f"the proxy socket {self.spec.proxy_uds} is gone")
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
        await asyncio.to_thread(_remove_sandbox_dir, self.dir, self._cg)
        self._p._live.pop(self.name, None)


def _remove_sandbox_dir(directory: Path, cg: _Cgroup) -> None:
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


# -- the provider --------------------------------------------------------------------------------------------

class LocalProvider(SandboxProvider):
    """Local backend. Options: `root` (where sandbox directories live; default
    `$OPENFORGE_SANDBOX_ROOT` or `/var/tmp/openforge-sandboxes`), `agent_user` (default `openforge-agent`),
    `bwrap` (the bubblewrap binary), `cgroups` (use per-sandbox cgroups when possible, default True),
    `rlimit_memory` (RLIMIT_AS as the memory fallback without cgroups, default False)."""

    name = "local"

    def __init__(self, *, root: Path | str | None = None, agent_user: str = "openforge-agent", bwrap: str = "bwrap",
                 cgroups: bool = True, rlimit_memory: bool = False, **_ignored: Any):
        self.root = Path(root or os.environ.get("OPENFORGE_SANDBOX_ROOT") or "/var/tmp/openforge-sandboxes")
        self.agent_user = agent_user
        self.bwrap = shutil.which(bwrap) or bwrap
        self.cgroups = cgroups and _is_root()
        self.rlimit_memory = rlimit_memory
        self._live: dict[str, LocalSandbox] = {}
        self._agent: tuple[int, int, str] | None = None
        self.python, self.python_prefix = self._find_python()

    @staticmethod
    def _find_python() -> tuple[str, str | None]:
        """An interpreter visible inside the sandbox for the launcher: /usr/bin/python3, else this one's base
        installation (bound read-only)."""
        if Path("/usr/bin/python3").exists():
            return "/usr/bin/python3", None
        base = Path(sys.base_prefix)
        exe = Path(getattr(sys, "_base_executable", sys.executable))
        if str(base).startswith("/usr/"):
            return str(exe), None
        return str(exe), str(base)

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        if not Path(self.bwrap).exists():
            raise SandboxError("the local sandbox needs bubblewrap: apt-get install bubblewrap")
        if spec.name in self._live:
            raise SandboxError(f"sandbox {spec.name} already exists in this process; names must be unique")
        if spec.proxy_uds is not None and not Path(spec.proxy_uds).exists():
            raise SandboxError(f"sandbox {spec.name}: the proxy socket {spec.proxy_uds} does not exist")
        for m in spec.mounts:
            if not Path(m.source).exists():
                raise SandboxError(f"sandbox {spec.name}: mount source {m.source} does not exist")
        return await asyncio.to_thread(self._create_blocking, spec)

    def _create_blocking(self, spec: SandboxSpec) -> LocalSandbox:
        if self._agent is None:
            if _is_root():
                self._agent = _ensure_user(self.agent_user)
            else:
                pw = pwd.getpwuid(os.getuid())
                self._agent = (pw.pw_uid, pw.pw_gid, pw.pw_dir)
        uid, gid, home = self._agent
        if not _is_root():
            home = "/home/" + pwd.getpwuid(uid).pw_name
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(self.root, 0o711)
        except OSError:
            pass
        d = self.root / spec.name
        if d.exists():  # a leftover of a crashed earlier attempt
            _remove_sandbox_dir(d, _Cgroup.existing(spec.name))
        d.mkdir(mode=0o700)
        fs = d / "fs"
        fs.mkdir(mode=0o755)
        os.chmod(fs, 0o755)
        _make_links(fs)
        try:
            workdir = PurePosixPath(spec.workdir or "/app")
            if workdir.parts[1] in RESERVED_TOPS:
                raise SandboxError(f"sandbox {spec.name}: workdir {workdir} is inside the host's read-only system dirs")
            for sub, mode, owner in (("tmp", 0o1777, None), ("root", 0o700, None), ("logs/verifier", 0o755, None),
                                     (home.lstrip("/"), 0o755, (uid, gid)),
                                     (str(workdir).lstrip("/"), 0o755, (uid, gid))):
                p = fs / sub
                p.mkdir(parents=True, exist_ok=True)
                os.chmod(p, mode)
                if owner is not None and _is_root():
                    os.chown(p, *owner)
            cg = _Cgroup(spec.name)
            if self.cgroups:
                cg.create(spec.memory_mb, spec.pids, spec.cpus)
            meta = {"name": spec.name, "labels": spec.all_labels(), "created": time.time(), "pid": os.getpid()}
            (d / META).write_text(json.dumps(meta))
        except BaseException:
            _remove_sandbox_dir(d, _Cgroup.existing(spec.name))
            raise
        sb = LocalSandbox(self, spec, d, cg, (uid, gid, home))
        self._live[spec.name] = sb
        return sb

    def _scan(self, run_label: str | None) -> list[Path]:
        out = []
        if not self.root.is_dir():
            return out
        want = label_value(run_label) if run_label is not None else None
        for d in sorted(self.root.iterdir()):
            try:
                meta = json.loads((d / META).read_text())
            except (OSError, ValueError):
                continue
            labels = meta.get("labels", {})
            if labels.get(LABEL_MANAGED) != "1":
                continue
            if want is not None and labels.get(LABEL_RUN) != want:
                continue
            out.append(d)
        return out

    async def list(self, run_label: str | None = None) -> list[str]:
        return [d.name for d in await asyncio.to_thread(self._scan, run_label)]

    async def cleanup(self, run_label: str | None) -> int:
        dirs = await asyncio.to_thread(self._scan, run_label)
        for d in dirs:
            sb = self._live.get(d.name)
            if sb is not None:
                await sb.destroy()
            else:
                await asyncio.to_thread(_remove_sandbox_dir, d, _Cgroup.existing(d.name))
        return len(dirs)
