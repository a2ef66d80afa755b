"""A light jail for one shell command in a work directory: bubblewrap as an unprivileged user, no network.

For the quickstart's fast episodes (thousands of one-command episodes on generated tasks), where a
container per episode would cost more than everything else together. What it gives: the command runs as
`nobody` in fresh user/mount/pid/net/ipc/uts namespaces, sees the host's system directories read-only, a
private /tmp, and the work directory at /app read-write; it has no network at all (not even the proxy: the
react harness calls the model, the jailed command only acts); process count and address space are limited
and a timeout kills the whole session. What it does not give: CPU or disk quotas, and world-readable host
files under /usr and /etc stay readable. Full isolation is the `docker` sandbox's job. Its bubblewrap command
comes from the local backend's builder (`bwrap.Bwrap`), started unprivileged (`bwrap.drop_privileges`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from .bwrap import Bwrap, drop_privileges

__all__ = ["JailError", "jail_argv", "jail_available", "prepare_workdir", "run_jailed"]

NOBODY = 65534
JAIL_PATH = "/usr/local/bin:/usr/bin:/bin"


class JailError(RuntimeError):
    """The jail cannot run here (bubblewrap, setpriv or prlimit missing, or user namespaces disabled)."""


def jail_available() -> tuple[bool, str]:
    missing = [t for t in ("bwrap", "setpriv", "prlimit") if shutil.which(t) is None]
    if missing:
        return False, f"missing {', '.join(missing)} (Debian packages bubblewrap, util-linux)"
    if os.geteuid() != 0:
        return False, "the jail drops to `nobody` and needs to start as root"
    return True, "ok"


def prepare_workdir(workdir: Path, files: dict[str, str]) -> None:
    """Write the initial files and hand the directory to `nobody`, the jail's user. Every directory above
    it must let others pass through (mode o+x), or the jail cannot reach it."""
    workdir.mkdir(parents=True, exist_ok=True)
    for parent in workdir.resolve().parents:
        if not parent.stat().st_mode & 0o001:
            raise JailError(f"{parent} is not traversable by others (chmod o+x): the jail's user could not "
                            f"reach {workdir}")
    for rel, content in files.items():
        path = workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    for path in [workdir, *workdir.rglob("*")]:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)


def jail_argv(workdir: Path, command: str, *, max_procs: int = 4096, max_memory_mb: int = 1024) -> list[str]:
    """`command` (bash) as `nobody` in fresh namespaces (network included), the host's system directories
    read-only, a private /tmp and `workdir` at /app."""
    jail = (Bwrap().namespaces(user=True).system().tmpfs("/tmp").bind(workdir, "/app", read_only=False)
            .chdir("/app").environment({"PATH": JAIL_PATH, "HOME": "/tmp", "LC_ALL": "C.UTF-8"}))
    return [*drop_privileges(NOBODY, NOBODY, max_procs=max_procs, max_memory_bytes=max_memory_mb * 1024 * 1024),
            *jail.command(["bash", "-c", command])]


def run_jailed(workdir: Path, command: str, timeout_s: float = 30.0) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) of `command` run in the jail; exit code 124 after a timeout."""
    proc = subprocess.Popen(jail_argv(workdir, command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        return out.decode(errors="replace"), err.decode(errors="replace") + f"\n[timed out after {timeout_s:g} s]", 124
    return out.decode(errors="replace"), err.decode(errors="replace"), proc.returncode
