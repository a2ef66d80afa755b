"""A sandbox's state copied into its grader (docs/design.md, invariant 7): grading runs in a fresh sandbox of the
task's image, and only the state the verifier reads travels there from the agent's sandbox — the work area and
the task's `[verifier] state_paths` (the *roots*, absolute paths).

The agent's sandbox writes each root as tar, its backend's way (Docker: the daemon's archive API, out of band;
local: the host's `tar` inside the sandbox's view; Kubernetes: the pod's own `tar`, which a root agent can
replace), into a `StateArchive` on the orchestrator's side, which keeps only what is safe to extract in the
grader, whatever produced the stream:

- names relative to `/`, at or below a root, without `..`; each name once (the first wins);
- directories, regular files, symbolic links (copied as links, never followed: their targets are the agent's
  words, not paths the copy reads or writes) and hard links to a file already copied; nothing below a link
  (a planted `app/x -> /usr/bin` followed by `app/x/python3` would write through it); no device, FIFO or
  socket;
- numeric owners and modes kept, extended attributes (file capabilities among them) dropped;
- at most `max_bytes` of archive: more is `StateTooLargeError`, the agent's doing (its episode gets reward 0
  with the reason), never the infrastructure's.

The grader then extracts the archive at `/` (`Sandbox.import_state`) with its own, untouched tools.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Protocol

from ..core.errors import TaskError

__all__ = ["ByteSink", "CappedSink", "StateArchive", "StateCopy", "StateTooLargeError", "state_roots"]


class ByteSink(Protocol):
    """Where a command's output can go instead of memory (a binary file, a `CappedSink`)."""

    def write(self, data: bytes, /) -> int: ...


class StateTooLargeError(TaskError):
    """The state to copy is larger than allowed: the agent's doing (grading gives its episode reward 0), not an
    infrastructure failure; outside an episode, the task's state_paths or the cap need a fix."""

    def __init__(self, max_bytes: int, what: str = "the state to grade"):
        super().__init__(f"{what} is larger than {max_bytes} bytes (the copy to the grader is capped)")
        self.max_bytes = max_bytes


def state_roots(paths: Iterable[str]) -> list[str]:
    """Absolute paths normalized, sorted, without those inside another one; ValueError for a relative path, `/`
    or one with `..`."""
    norm = set()
    for p in paths:
        pp = PurePosixPath(p)
        if not pp.is_absolute() or ".." in pp.parts or pp == PurePosixPath("/"):
            raise ValueError(f"a state path must be an absolute path other than / without '..', got {p!r}")
        norm.add(str(pp))
    return sorted(p for p in norm if not any(p != q and p.startswith(q + "/") for q in norm))


@dataclass
class StateCopy:
    """What a copy carried: the roots, how many entries and archive bytes, and what it left out as unsafe (the
    first few names, with why)."""

    roots: list[str]
    entries: int = 0
    bytes: int = 0
    dropped: list[str] = field(default_factory=list)


class CappedSink:
    """A binary sink that writes at most `max_bytes` through and remembers whether more came."""

    def __init__(self, out: IO[bytes], max_bytes: int):
        self.out, self.max_bytes, self.written, self.over = out, max_bytes, 0, False

    def write(self, data: bytes) -> int:
        room = self.max_bytes - self.written
        if len(data) > room:
            self.over = True
            data = data[: max(0, room)]
        self.out.write(data)
        self.written += len(data)
        return len(data)


class StateArchive:
    """The sanitized tar of a state, written to `out` as the source's raw archives are `add`ed (see the module
    docstring for what is kept)."""

    DROPPED_SHOWN = 20

    def __init__(self, out: IO[bytes], roots: list[str], max_bytes: int):
        self.roots = [r.lstrip("/") for r in roots]
        self.max_bytes = max_bytes
        self._tar = tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT)
        self._names: set[str] = set()
        self._files: set[str] = set()
        self._links: set[str] = set()
        self._trusted_bytes = 0
        self.copy = StateCopy(roots=list(roots))

    def add_trusted_tree(self, src: Path, dest: str) -> None:
        """Add a directory of the orchestrator's (the task's tests) below `dest`, owned by root, before the
        agent's state; its bytes do not count against `max_bytes`. `dest` itself is not an entry: the grader
        made it fresh. Links are kept as links, never followed."""
        start = self._tar.offset
        base = dest.strip("/")
        for path in sorted(src.rglob("*")):
            ti = self._tar.gettarinfo(str(path), arcname=f"{base}/{path.relative_to(src).as_posix()}")
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            if ti.isreg():
                with path.open("rb") as f:
                    self._tar.addfile(ti, f)
            else:
                self._tar.addfile(ti)
        self._trusted_bytes += self._tar.offset - start

    def add(self, source: tarfile.TarFile, rename: tuple[str, str] | None = None) -> None:
        """Copy the safe members of `source`, a tar stream; `rename=(old, new)` maps a top entry named `old`
        (Docker's archive names it after the path's last component) to `new` (the root, relative to /)."""
        for m in source:
            name = self._name(m.name, rename)
            why = self._refusal(m, name)
            if why is not None:
                self._drop(m.name, why)
                continue
            assert name is not None  # refused above otherwise
            self._copy(source, m, name, rename)

    def add_file(self, f: IO[bytes]) -> None:
        """`add` the raw tar held in file `f`, from its start (an empty file holds nothing)."""
        f.seek(0)
        if not f.read(1):
            return
        f.seek(0)
        with tarfile.open(fileobj=f, mode="r|") as tf:
            self.add(tf)

    def finish(self) -> StateCopy:
        """End the archive; what it carried."""
        self._tar.close()
        self.copy.bytes = self._tar.offset
        return self.copy

    # -- rules ---------------------------------------------------------------------------------------------

    @staticmethod
    def _name(raw: str, rename: tuple[str, str] | None) -> str | None:
        parts = [p for p in PurePosixPath(raw.lstrip("/")).parts if p != "."]
        if not parts or ".." in parts:
            return None
        if rename is not None:
            old, new = rename
            if parts[0] != old:
                return None
            parts = [*PurePosixPath(new).parts, *parts[1:]]
        return "/".join(parts)

    def _refusal(self, m: tarfile.TarInfo, name: str | None) -> str | None:
        if name is None:
            return "a name outside the copy"
        if not any(name == r or name.startswith(r + "/") for r in self.roots):
            return "outside the state's paths"
        if name in self._names:
            return "a second entry of that name"
        parents = PurePosixPath(name).parents
        if any(str(p) in self._links for p in parents):
            return "below a symbolic link"
        if not (m.isdir() or m.isreg() or m.issym() or m.islnk()):
            return "not a file, directory or link"
        return None

    def _copy(self, source: tarfile.TarFile, m: tarfile.TarInfo, name: str, rename: tuple[str, str] | None) -> None:
        ti = tarfile.TarInfo(name)
        ti.mode, ti.uid, ti.gid, ti.mtime = m.mode, m.uid, m.gid, m.mtime
        ti.uname = ti.gname = ""
        if m.isdir():
            ti.type = tarfile.DIRTYPE
        elif m.issym():
            ti.type, ti.linkname = tarfile.SYMTYPE, m.linkname
        elif m.islnk():
            target = self._name(m.linkname, rename)
            if target is None or target not in self._files:
                self._drop(m.name, "a hard link to a file not copied")
                return
            ti.type, ti.linkname = tarfile.LNKTYPE, target
        else:
            ti.type, ti.size = tarfile.REGTYPE, m.size
        if self._tar.offset - self._trusted_bytes + 1536 + ti.size > self.max_bytes:  # header, padding, end
            raise StateTooLargeError(self.max_bytes)
        self._tar.addfile(ti, source.extractfile(m) if ti.type == tarfile.REGTYPE else None)
        self._names.add(name)
        if ti.type == tarfile.REGTYPE:
            self._files.add(name)
        elif ti.type == tarfile.SYMTYPE:
            self._links.add(name)
        self.copy.entries += 1

    def _drop(self, raw: str, why: str) -> None:
        if len(self.copy.dropped) < self.DROPPED_SHOWN:
            self.copy.dropped.append(f"{raw} ({why})")
