"""A light jail for one shell command in a work directory: bubblewrap as an unprivileged user, no network.

For the quickstart's fast episodes (thousands of one-command episodes on generated tasks), where a
container per episode would cost more than everything else together. What it gives: the command runs as an
unprivileged user of its own (`nobody` inside, a distinct uid per work directory outside: `prepare_workdir`)
in fresh user/mount/pid/net/ipc/uts namespaces, sees the host's system directories read-only, a private /tmp,
and the work directory at /app read-write; it has no network at all (not even the proxy: the react harness
calls the model, the jailed command only acts); a timeout kills the whole session.

One jail cannot starve the others:
- **processes**: each command gets a cgroup of its own when the machine allows it (root, a writable v1 or v2
  hierarchy): at most `JAIL_PIDS` processes, `max_memory_mb` of memory and one CPU, enforced by the kernel.
  Without cgroups, RLIMIT_NPROC is the fallback, and since it counts per uid, every work directory has its own
  uid (a range from `JAIL_UID_BASE`), so one jail's fork bomb spends only its own allowance;
- **output**: stdout and stderr are read with a cap (`output_cap` bytes each): the first and the last
  `output_cap / 2` bytes are kept, the middle dropped, and the result ends with
  `[output truncated: N bytes dropped]` — so a `yes` costs a bounded buffer, and the model (which sees the last
  4000 characters of a command's output) sees the tail of what ran and that something was cut.

What it does not give: disk quotas, and world-readable host files under /usr and /etc stay readable. Full
isolation is the `docker` sandbox's job. Its bubblewrap command comes from the local backend's builder
(`bwrap.Bwrap`), started unprivileged (`bwrap.drop_privileges`).
"""

from __future__ import annotations

import itertools
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import IO, NamedTuple

from openforge.core.errors import InfrastructureError

from .bwrap import Bwrap, drop_privileges
from .cgroups import Cgroup

__all__ = ["JAIL_PIDS", "JailError", "JailResult", "jail_argv", "jail_available", "prepare_workdir", "run_jailed"]

NOBODY = 65534
JAIL_PATH = "/usr/local/bin:/usr/bin:/bin"
JAIL_PIDS = 256  # processes (and threads) one jailed command may have at once
JAIL_MEMORY_MB = 1024
OUTPUT_CAP = 64 << 10  # bytes kept per stream: the first and the last half
# Work directories get uids from this range (no passwd entry; `nobody` inside the jail's user namespace).
JAIL_UID_BASE = 1_900_000_000
JAIL_UIDS = 1 << 16

_uids = itertools.count()
_uids_lock = threading.Lock()


class JailError(InfrastructureError, RuntimeError):
    """The jail cannot run here (bubblewrap, setpriv or prlimit missing, or user namespaces disabled)."""


class JailResult(NamedTuple):
    """What one jailed command did (a tuple, so it is what `openforge.faults.local.CommandRunner` returns)."""

    stdout: str
    stderr: str
    exit_code: int


def jail_available() -> tuple[bool, str]:
    """(usable, reason): whether the jail's tools are here and this process may drop to its users."""
    missing = [t for t in ("bwrap", "setpriv", "prlimit") if shutil.which(t) is None]
    if missing:
        return False, f"missing {', '.join(missing)} (Debian packages bubblewrap, util-linux)"
    if os.geteuid() != 0:
        return False, "the jail drops to an unprivileged user and needs to start as root"
    return True, "ok"


def _next_uid() -> int:
    with _uids_lock:
        return JAIL_UID_BASE + (os.getpid() * 7919 + next(_uids)) % JAIL_UIDS


def prepare_workdir(workdir: Path, files: dict[str, str]) -> None:
    """Write the initial files and hand the directory to a jail user of its own (a fresh uid from the jail
    range, `nobody` inside the jail). Every directory above it must let others pass through (mode o+x), or
    the jail cannot reach it."""
    workdir.mkdir(parents=True, exist_ok=True)
    for parent in workdir.resolve().parents:
        if not parent.stat().st_mode & 0o001:
            raise JailError(
                f"{parent} is not traversable by others (chmod o+x): the jail's user could not reach {workdir}"
            )
    for rel, content in files.items():
        path = workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    uid = _next_uid()
    for path in [workdir, *workdir.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)


def jail_argv(
    workdir: Path,
    command: str,
    *,
    max_procs: int = JAIL_PIDS,
    max_memory_mb: int = JAIL_MEMORY_MB,
    uid: int = NOBODY,
    cgroup_procs: list[Path] | None = None,
) -> list[str]:
    """`command` (bash) as `uid` (`nobody` inside) in fresh namespaces (network included), the host's system
    directories read-only, a private /tmp and `workdir` at /app; first moved into the cgroups whose
    `cgroup.procs` files are given (as root, before anything of the command runs)."""
    jail = (
        Bwrap()
        .namespaces(user=True)
        .system()
        .tmpfs("/tmp")
        .bind(workdir, "/app", read_only=False)
        .chdir("/app")
        .environment({"PATH": JAIL_PATH, "HOME": "/tmp", "LC_ALL": "C.UTF-8"})
    )
    if uid != NOBODY:
        jail = jail.ids(NOBODY, NOBODY)
    enter: list[str] = []
    if cgroup_procs:
        enter = [
            "sh",
            "-c",
            'for f; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; shift; done; shift; exec "$@"',
            "sh",
            *map(str, cgroup_procs),
            "--",
        ]
    return [
        *enter,
        *drop_privileges(uid, uid, max_procs=max_procs, max_memory_bytes=max_memory_mb * 1024 * 1024),
        *jail.command(["bash", "-c", command]),
    ]


class _CappedStream:
    """One stream's output: the first and the last `cap / 2` bytes, and how many were dropped between."""

    def __init__(self, cap: int):
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        extra = len(self.tail) - self.half
        if extra > 0:
            del self.tail[:extra]
            self.dropped += extra

    def text(self) -> str:
        return (bytes(self.head) + bytes(self.tail)).decode(errors="replace")


def _read_capped(
    stdout: IO[bytes], stderr: IO[bytes], timeout_s: float, cap: int
) -> tuple[_CappedStream, _CappedStream, bool]:
    """Read stdout and stderr until both close or the time is up: (stdout, stderr, timed out)."""
    out, err = stdout.fileno(), stderr.fileno()
    streams = {out: _CappedStream(cap), err: _CappedStream(cap)}
    sel = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return streams[out], streams[err], True
            for key, _ in sel.select(min(left, 1.0)):
                try:
                    data = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                if data:
                    streams[key.fd].add(data)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
    return streams[out], streams[err], False


def _jail_cgroup(max_memory_mb: int) -> Cgroup | None:
    """A cgroup for one jailed command (pids, memory, one CPU), or None where cgroups are not writable."""
    cg = Cgroup(f"jail-{uuid.uuid4().hex[:16]}")
    return cg if cg.create(max_memory_mb, JAIL_PIDS, 1.0) else None


def run_jailed(workdir: Path, command: str, timeout_s: float = 30.0, *, output_cap: int = OUTPUT_CAP) -> JailResult:
    """(stdout, stderr, exit code) of `command` run in the jail as the work directory's owner; exit code 124
    after a timeout. Each stream keeps its first and last `output_cap / 2` bytes; when anything was dropped,
    stderr ends with `[output truncated: N bytes dropped]`."""
    uid = workdir.stat().st_uid
    if uid == 0:  # a directory not made by prepare_workdir: never run a jailed command as root
        uid = NOBODY
    cg = _jail_cgroup(JAIL_MEMORY_MB)
    procs = [d / "cgroup.procs" for d in cg.dirs.values()] if cg is not None else None
    proc = subprocess.Popen(
        jail_argv(workdir, command, uid=uid, cgroup_procs=procs),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    stdout, stderr = proc.stdout, proc.stderr
    assert stdout is not None and stderr is not None  # opened with PIPE
    timed_out = True
    try:
        out, err, timed_out = _read_capped(stdout, stderr, timeout_s, output_cap)
    finally:
        if timed_out:  # (or interrupted) the session and everything in the jail's cgroup
            _kill(proc, cg)
        code = proc.wait()
        stdout.close()
        stderr.close()
        if cg is not None:
            cg.kill_all()
            cg.remove()
    if timed_out:
        code = 124
    errs = err.text()
    dropped = out.dropped + err.dropped
    if dropped:
        errs += f"\n[output truncated: {dropped} bytes dropped]"
    if timed_out:
        errs += f"\n[timed out after {timeout_s:g} s]"
    return JailResult(out.text(), errs, code)


def _kill(proc: subprocess.Popen, cg: Cgroup | None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if cg is not None:
        cg.kill_all()
