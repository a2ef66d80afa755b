"""A container's changes read from its overlay2 layers on the host, as `docker diff` reports them, without asking
the daemon: `docker diff` costs the daemon ~0.45 s of CPU per call on these machines (it compares the whole
merged file system with the image's; a tenth of an episode's whole cost at concurrency 4), walking the
container's upper directory here costs milliseconds.

Only where the daemon is local, uses the overlay2 driver and its layer directories can be read from here
(`OverlayLayers.of`); otherwise the caller asks the daemon. Nothing is followed: the upper directory is the
agent's (read with `lstat`), and a lower layer is only entered through components that are real directories
in it.

The rules are those of the daemon's comparison of the container's tree with the image's (`ChangesDirs`), applied
to what the upper directory holds, against the *lower view* (the image's layers merged as overlayfs merges
them: the top layer's entry wins, a whiteout hides, an opaque directory hides what lies below it):

- an entry the lower view lacks is *added*; a whiteout of an entry it has is *deleted*;
- an entry it has is *changed* when its type, permissions, owner, device number or file capability differ or,
  for what is not a directory, its size or modification time (a directory's size and time are not a change);
- where a directory's entries no longer show what the lower view had below it (an opaque directory: what
  `rm -rf d && mkdir d` leaves; a non-directory put in a directory's place), each of those is *deleted*;
- a directory above a change is *changed*.

`tests/sandbox/test_docker_overlay.py` holds the result to `docker diff` on the same container.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import InfrastructureError

__all__ = ["OverlayLayers", "RedirectedDirectoryError", "overlay_changes"]

CHANGED, ADDED, DELETED = 0, 1, 2  # `docker diff`'s kinds


class RedirectedDirectoryError(InfrastructureError, OSError):
    """A directory of the upper layer redirects to another lower path (a renamed directory, where the kernel's
    `redirect_dir` is on): the lower view cannot be read by path, so the caller asks the daemon."""


@dataclass(frozen=True)
class OverlayLayers:
    """A container's upper (writable) directory and its lower layers, top first."""

    upper: Path
    lowers: tuple[Path, ...]

    @classmethod
    def of(cls, info: dict[str, Any]) -> OverlayLayers | None:
        """From `docker inspect`'s answer; None where the driver is not overlay2 or the directories cannot be
        read here (a remote daemon, a daemon in a VM, not enough rights)."""
        driver = info.get("GraphDriver") or {}
        data = driver.get("Data") or {}
        if driver.get("Name") != "overlay2" or not data.get("UpperDir") or not data.get("LowerDir"):
            return None
        upper = Path(data["UpperDir"])
        lowers = tuple(Path(p) for p in str(data["LowerDir"]).split(":") if p)
        if not all(os.access(p, os.R_OK | os.X_OK) and p.is_dir() for p in (upper, *lowers)):
            return None
        return cls(upper, lowers)


def overlay_changes(layers: OverlayLayers) -> list[dict[str, Any]]:
    """The container's changes as `docker diff` rows (`{"Path": ..., "Kind": 0|1|2}`), parents first.
    Iterative: the agent chooses how deep its directories go."""
    view = _LowerView(layers.lowers)
    rows: dict[str, int] = {}
    pending = [""]
    while pending:
        rel = pending.pop()
        with os.scandir(layers.upper / rel.lstrip("/") if rel else layers.upper) as it:
            entries = sorted(it, key=lambda e: e.name)
        below = []
        for entry in entries:
            path = f"{rel}/{entry.name}"
            st = entry.stat(follow_symlinks=False)
            old = view.stat(path)
            if _whiteout(st):
                if old is not None:
                    _record(rows, path, DELETED)
                continue
            if old is None:
                _record(rows, path, ADDED)
            elif _differs(st, old, entry.path, view.capability(path)):
                _record(rows, path, CHANGED)
            is_dir = stat.S_ISDIR(st.st_mode)
            if is_dir and _xattr(entry.path, "trusted.overlay.redirect") is not None:
                raise RedirectedDirectoryError(path)
            if old is not None and stat.S_ISDIR(old.st_mode) and (not is_dir or _opaque(entry.path)):
                kept = set(os.listdir(entry.path)) if is_dir else set()
                for name in sorted(view.children(path) - kept):
                    _record(rows, f"{path}/{name}", DELETED)
            if is_dir:
                below.append(path)
        pending.extend(reversed(below))
    return [{"Path": p, "Kind": k} for p, k in rows.items()]


@dataclass
class _LowerView:
    """The lower layers merged as overlayfs merges them, looked up by path without following anything."""

    lowers: tuple[Path, ...]
    _dirs: dict[str, list[Path]] = field(default_factory=dict)  # directory -> the layers that show entries in it

    def stat(self, path: str) -> os.stat_result | None:
        """What the lower view has at `path` (lstat), or None."""
        found = self._find(path)
        return found[1] if found else None

    def capability(self, path: str) -> bytes | None:
        found = self._find(path)
        return _xattr(str(found[0] / path.lstrip("/")), "security.capability") if found else None

    def children(self, path: str) -> set[str]:
        """The names the lower view shows in directory `path`."""
        names: dict[str, bool] = {}
        for layer in self._contributors(path):
            for name in os.listdir(layer / path.lstrip("/")):
                if name not in names:
                    names[name] = not _whiteout(os.lstat(layer / path.lstrip("/") / name))
        return {n for n, shown in names.items() if shown}

    def _find(self, path: str) -> tuple[Path, os.stat_result] | None:
        parent, name = path.rsplit("/", 1)
        for layer in self._contributors(parent):
            try:
                st = os.lstat(layer / parent.lstrip("/") / name)
            except FileNotFoundError:
                continue
            return None if _whiteout(st) else (layer, st)
        return None

    def _contributors(self, path: str) -> list[Path]:
        """The layers, top first, in which `path` is a real directory that the merged view shows entries of."""
        if path == "":
            return list(self.lowers)
        if path in self._dirs:
            return self._dirs[path]
        parent, name = path.rsplit("/", 1)
        layers: list[Path] = []
        for layer in self._contributors(parent):
            try:
                st = os.lstat(layer / parent.lstrip("/") / name)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                break  # a whiteout or a non-directory hides what lies below
            layers.append(layer)
            if _opaque(str(layer / path.lstrip("/"))):
                break
        self._dirs[path] = layers
        return layers


def _differs(new: os.stat_result, old: os.stat_result, new_path: str, old_capability: bytes | None) -> bool:
    if (new.st_mode, new.st_uid, new.st_gid, new.st_rdev) != (old.st_mode, old.st_uid, old.st_gid, old.st_rdev):
        return True
    if not stat.S_ISDIR(new.st_mode) and (new.st_size != old.st_size or not _same_time(new, old)):
        return True
    return _xattr(new_path, "security.capability") != old_capability


def _same_time(a: os.stat_result, b: os.stat_result) -> bool:
    """As the daemon compares times: the same second, and the same nanoseconds unless either has none."""
    sa, na = divmod(a.st_mtime_ns, 1_000_000_000)
    sb, nb = divmod(b.st_mtime_ns, 1_000_000_000)
    return sa == sb and (na == nb or na == 0 or nb == 0)


def _record(rows: dict[str, int], path: str, kind: int) -> None:
    """Record a change and, as changed, each directory above it not yet recorded."""
    parent = path.rsplit("/", 1)[0]
    chain = []
    while parent and parent not in rows:
        chain.append(parent)
        parent = parent.rsplit("/", 1)[0]
    for p in reversed(chain):
        rows[p] = CHANGED
    rows.setdefault(path, kind)


def _whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _opaque(path: str) -> bool:
    return _xattr(path, "trusted.overlay.opaque") == b"y"


def _xattr(path: str, name: str) -> bytes | None:
    try:
        return os.getxattr(path, name, follow_symlinks=False)
    except OSError:
        return None
