"""The one bubblewrap command builder, used by the local backend's sandboxes and by the light jail.

`Bwrap` builds bwrap's argv in the order bwrap applies it: the namespaces, the root (a sandbox's own
directory, else bwrap's empty tmpfs), the host's system directories read-only with the `/bin`, `/lib`, ... links
recreated, fresh `/proc` and `/dev`, further mounts, then the working directory and a cleared environment, then
the command. The user switch happens in one of two places: before bwrap (`drop_privileges`: bwrap itself runs
as an unprivileged user under rlimits, in a user namespace of its own; the jail), or inside, after a launcher
that must start as root (the local backend's forwarder, `--user`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "RESERVED_TOPS",
    "SYSTEM_LINKS",
    "SYSTEM_RO",
    "Bwrap",
    "bwrap_available",
    "drop_privileges",
    "link_args",
    "make_links",
]

SYSTEM_RO = ("usr", "etc")  # the host's, read-only, in every sandbox
SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# top-level directories a sandbox cannot write: the host's system directories and the kernel's file systems
RESERVED_TOPS = set(SYSTEM_RO) | set(SYSTEM_LINKS) | {"proc", "dev", "run", "sys"}


def link_args(existing: Path | None = None) -> list[str]:
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


def make_links(fs: Path) -> None:
    """Make the host's /bin, /lib, ... symlinks in a persistent sandbox root `fs`, and put them back where
    something else stands in their place (a root command may replace `/bin` with a directory of look-alikes,
    which bubblewrap could not even mount over): run before every command, so no command ever sees a replaced
    system link. Host-side, never following what it removes."""
    for name in SYSTEM_LINKS:
        p = Path("/") / name
        if not p.is_symlink():
            continue
        target, mine = os.readlink(p), fs / name
        if mine.is_symlink() and os.readlink(mine) == target:
            continue
        if mine.is_dir() and not mine.is_symlink():
            shutil.rmtree(mine, ignore_errors=True)
        elif mine.is_symlink() or mine.exists():
            mine.unlink()
        os.symlink(target, mine)


class Bwrap:
    """bwrap's argv, one method per part, in mount order; `command(argv)` returns it. The process dies with
    its parent and leads a new session (no terminal to inject keystrokes into)."""

    def __init__(self, exe: str = "bwrap"):
        self._args = [exe, "--die-with-parent", "--new-session"]

    def namespaces(self, *, share_network: bool = False, user: bool = False, hostname: str | None = None) -> Bwrap:
        """Fresh pid, ipc, uts and cgroup namespaces, and a fresh network namespace (loopback only) unless
        `share_network`. `user`: a user namespace too, for a bwrap started unprivileged."""
        self._args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not share_network:
            self._args.append("--unshare-net")
        if user:
            self._args.append("--unshare-user-try")
        if hostname is not None:
            self._args += ["--hostname", hostname]
        return self

    def ids(self, uid: int, gid: int) -> Bwrap:
        """The uid and gid the command has inside its user namespace (needs `namespaces(user=True)`)."""
        self._args += ["--uid", str(uid), "--gid", str(gid)]
        return self

    def root(self, fs: Path) -> Bwrap:
        """A persistent root directory (what is written anywhere outside the mounts stays there)."""
        return self.bind(fs, "/", read_only=False)

    def system(self, existing_root: Path | None = None) -> Bwrap:
        """The host's /usr and /etc read-only, the /bin, /lib, ... links, fresh /proc and /dev."""
        for top in SYSTEM_RO:
            self._args += ["--ro-bind", f"/{top}", f"/{top}"]
        self._args += link_args(existing_root)
        self._args += ["--proc", "/proc", "--dev", "/dev"]
        return self

    def bind(self, source: Path | str, target: str, *, read_only: bool = True) -> Bwrap:
        self._args += ["--ro-bind" if read_only else "--bind", str(source), target]
        return self

    def tmpfs(self, target: str) -> Bwrap:
        self._args += ["--tmpfs", target]
        return self

    def dir(self, target: str, *, perms: str | None = None) -> Bwrap:
        if perms is not None:
            self._args += ["--perms", perms]
        self._args += ["--dir", target]
        return self

    def chdir(self, workdir: str) -> Bwrap:
        self._args += ["--chdir", workdir]
        return self

    def environment(self, env: Mapping[str, str]) -> Bwrap:
        """Exactly `env`: nothing of the caller's environment passes."""
        self._args.append("--clearenv")
        for k, v in env.items():
            self._args += ["--setenv", k, v]
        return self

    def command(self, argv: list[str]) -> list[str]:
        return [*self._args, "--", *argv]


def drop_privileges(
    uid: int, gid: int, *, max_procs: int | None = None, max_memory_bytes: int | None = None
) -> list[str]:
    """The prefix that starts bwrap as `uid:gid` with no supplementary groups (setpriv), under RLIMIT_NPROC /
    RLIMIT_AS (prlimit; NPROC counts every process of that user, all its sandboxes together)."""
    limits = []
    if max_procs is not None:
        limits.append(f"--nproc={max_procs}")
    if max_memory_bytes is not None:
        limits.append(f"--as={max_memory_bytes}")
    prefix = ["prlimit", *limits, "--"] if limits else []
    return [*prefix, "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]


def bwrap_available(bwrap: str = "bwrap") -> tuple[bool, str]:
    """Can bubblewrap create the namespaces the local sandbox needs here?"""
    exe = shutil.which(bwrap)
    if exe is None:
        return False, "bubblewrap is not installed (apt-get install bubblewrap)"
    args = Bwrap(exe).namespaces().system().command(["/bin/true"])
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"bubblewrap failed: {e}"
    if r.returncode != 0:
        return False, f"bubblewrap cannot create namespaces here: {r.stderr.strip()}"
    return True, "bubblewrap works"
