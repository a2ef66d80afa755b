"""File-system snapshots taken in band, for backends that cannot see a sandbox's changes from outside
(Kubernetes: the node's overlay is out of reach): `SNAPSHOT_SCRIPT` lists every path of the sandbox's root
file system with its type, inode, ctime, size, mode and owner; one listing when the sandbox is created (kept
compressed on the orchestrator's side, out of the agent's reach) and one at grading, compared by
`diff_snapshots` into `PathChange`s.

Weaker than Docker's `docker diff`, and said so: the listing is made by the sandbox's own `find`, which a
root agent can replace (a replaced `find` that hides itself goes unseen). ctime cannot be set back without
CAP_SYS_TIME, so a file rewritten and re-dated is still seen as changed. Read-only mounts (nothing can change
under them) and other file systems (`-xdev`: /proc, /sys, /dev, volumes) are not listed.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from .base import PathChange

__all__ = ["NO_GNU_FIND", "SNAPSHOT_SCRIPT", "Snapshot", "diff_snapshots"]

NO_GNU_FIND = 45  # the script's exit status when the image's find cannot print what is needed

# Prints one NUL-terminated record per path: "type inode ctime size mode uid gid path".
SNAPSHOT_SCRIPT = r"""
find / -maxdepth 0 -printf '' 2>/dev/null || exit 45
set --
while read -r _id _parent _dev _root mp opts _rest; do
  case ",$opts," in
    *,ro,*) [ "$mp" = / ] || set -- "$@" -path "$(printf '%b' "$mp")" -prune -o ;;
  esac
done < /proc/self/mountinfo
exec find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o "$@" \
  -printf '%y %i %C@ %s %m %U %G %p\0'
"""


class Snapshot:
    """One listing, kept compressed."""

    def __init__(self, raw: bytes):
        self._data = zlib.compress(raw, 6)

    def entries(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for rec in zlib.decompress(self._data).split(b"\0"):
            if not rec:
                continue
            fields = rec.decode("utf-8", "surrogateescape").split(" ", 7)
            if len(fields) == 8:
                out[fields[7]] = tuple(fields[:7])
        return out


def diff_snapshots(before: Snapshot, after: Snapshot, *, ignore: Iterable[str] = ()) -> list[PathChange]:
    """What changed between two listings, sorted by path; paths in `ignore` (and below them) left out."""
    old, new = before.entries(), after.entries()
    skip = tuple(i.rstrip("/") for i in ignore)

    def ignored(path: str) -> bool:
        return any(path == i or path.startswith(i + "/") for i in skip)

    out = []
    for path in sorted(old.keys() | new.keys()):
        if ignored(path):
            continue
        if path not in old:
            out.append(PathChange(path=path, kind="added"))
        elif path not in new:
            out.append(PathChange(path=path, kind="deleted"))
        elif old[path] != new[path]:
            out.append(PathChange(path=path, kind="changed"))
    return out
