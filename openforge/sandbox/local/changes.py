"""What changed in a local sandbox's file system, read from the host: the sandbox's own root (`<dir>/fs`, every
writable path it has) walked with `lstat`, never following a link, by the orchestrator's process — nothing the
agent runs takes part, so the agent cannot hide a change (its `find` or `ls` are not asked).

A listing records, per path, its type, inode, ctime, size, mode and owner (the records of
`openforge.sandbox.filesnap`, compared by its `diff_snapshots`). ctime cannot be set back without CAP_SYS_TIME
(no exec in a local sandbox has any capability), so a file rewritten and re-dated is still seen as changed, and
a file replaced by another (rename) has a new inode. Left out: the mount points of what is not the sandbox's
own (the host's read-only `/usr` and `/etc`, `/proc`, `/dev`, `/run`, the spec's mounts): nothing the agent
writes lands there.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ..filesnap import Snapshot

__all__ = ["host_snapshot"]

_TYPES = (
    (stat.S_ISDIR, "d"),
    (stat.S_ISREG, "f"),
    (stat.S_ISLNK, "l"),
    (stat.S_ISFIFO, "p"),
    (stat.S_ISSOCK, "s"),
    (stat.S_ISCHR, "c"),
    (stat.S_ISBLK, "b"),
)


def _record(st: os.stat_result, path: str) -> bytes:
    kind = next((c for test, c in _TYPES if test(st.st_mode)), "?")
    fields = (kind, st.st_ino, st.st_ctime_ns, st.st_size, oct(stat.S_IMODE(st.st_mode))[2:], st.st_uid, st.st_gid)
    return (" ".join(map(str, fields)) + " ").encode() + os.fsencode(path) + b"\0"


def host_snapshot(fs: Path, skip: Iterable[str]) -> Snapshot:
    """The listing of the sandbox root `fs` (paths as seen inside: `/app/x`), without the in-sandbox paths in
    `skip` and what lies below them."""
    skipped = {s.rstrip("/") or "/" for s in skip}
    out: list[bytes] = []
    root = os.fspath(fs)
    stack = [(root, "")]
    while stack:
        host_dir, inside = stack.pop()
        try:
            entries = list(os.scandir(host_dir))
        except OSError:  # gone meanwhile, or not a directory any more
            continue
        for entry in entries:
            path = f"{inside}/{entry.name}"
            if path in skipped:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            out.append(_record(st, path))
            if stat.S_ISDIR(st.st_mode):
                stack.append((entry.path, path))
    return Snapshot(b"".join(out))
