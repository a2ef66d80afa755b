"""Tar helpers shared by the sandbox backends (copy in / copy out as `docker cp`-style archives)."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

__all__ = ["copy_in_target", "extract_archive", "make_tar"]


def make_tar(src: Path, arcname: str, uid: int = 0, gid: int = 0) -> bytes:
    """A tar of file or directory `src` whose top entry is `arcname`, every entry owned by uid:gid."""
    with tempfile.SpooledTemporaryFile(max_size=32 << 20) as tmp:
        with tarfile.open(fileobj=tmp, mode="w", format=tarfile.PAX_FORMAT) as tf:

            def fix(ti: tarfile.TarInfo) -> tarfile.TarInfo:
                ti.uid, ti.gid, ti.uname, ti.gname = uid, gid, "", ""
                return ti

            tf.add(str(src), arcname=arcname, recursive=True, filter=fix)
        tmp.seek(0)
        return tmp.read()


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def extract_archive(tf: tarfile.TarFile, dest: Path, *, is_dir: bool) -> None:
    """Extract a `docker cp`-style archive (one top entry named after the source) into `dest`: a file to
    `dest`, a directory's contents into `dest`. Unsafe members (absolute or `..` paths, links out of `dest`,
    devices, hard links) are skipped. Links are judged as they resolve when written and again at the end,
    since a later member can change what an earlier link resolves to (a chain of links, each harmless when
    made, can point out of `dest`): nothing is ever written through a link that leaves `dest`, and no link that
    leaves it stays. A single file that is a link is made only when it stays beside `dest` (relative, not
    leaving `dest`'s directory); otherwise FileNotFoundError."""
    dest = Path(dest)
    if not is_dir:
        _extract_single(tf, dest)
        return
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    dir_modes: list[tuple[Path, int]] = []
    links: list[Path] = []
    for m in tf:
        parts = PurePosixPath(m.name).parts
        if not parts:
            continue
        rel_parts = parts[1:]  # strip the top entry (the source's own name)
        if not rel_parts:
            continue
        if any(p in ("..", "") for p in rel_parts) or PurePosixPath(m.name).is_absolute():
            continue
        target = root.joinpath(*rel_parts)
        if not _inside(target.parent.resolve(), root):
            continue  # a link on the way leaves dest: writing there would write outside
        if m.isdir():
            if target.is_symlink():
                continue
            target.mkdir(parents=True, exist_ok=True)
            if not _inside(target.resolve(), root):
                continue
            dir_modes.append((target, m.mode & 0o777 | 0o700))
        elif m.isfile():
            target.parent.mkdir(parents=True, exist_ok=True)
            if not _inside(target.parent.resolve(), root):
                continue
            _write_member(tf, m, target)
        elif m.issym():
            link = PurePosixPath(m.linkname)
            resolved = (target.parent / m.linkname).resolve() if not link.is_absolute() else None
            if resolved is None or not _inside(resolved, root):
                continue  # absolute or escaping link: skipped
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.exists():
                continue  # a directory stays
            os.symlink(m.linkname, target)
            links.append(target)
        # hard links, devices, fifos: skipped
    for made in links:  # what later members made of earlier links: remove any that now leaves dest
        if made.is_symlink() and not _inside(made.resolve(), root):
            made.unlink()
    for d, mode in reversed(dir_modes):
        try:
            if not d.is_symlink():
                os.chmod(d, mode)
        except OSError:
            pass


def _write_member(tf: tarfile.TarFile, m: tarfile.TarInfo, target: Path) -> None:
    """Write a file member to `target`, never through a link (one there is replaced)."""
    if target.is_symlink():
        target.unlink()
    f = tf.extractfile(m)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        if f is not None:
            shutil.copyfileobj(f, out)
    os.chmod(target, m.mode & 0o755 | 0o600)


def _extract_single(tf: tarfile.TarFile, dest: Path) -> None:
    for m in tf:
        if m.isfile():
            dest.parent.mkdir(parents=True, exist_ok=True)
            _write_member(tf, m, dest)
            return
        if m.issym():
            link = PurePosixPath(m.linkname)
            parent = dest.parent.resolve()
            if link.is_absolute() or not _inside((parent / m.linkname).resolve(), parent):
                raise FileNotFoundError(
                    f"{m.name} is a symbolic link to {m.linkname}, which leaves {dest.parent}: not copied"
                )
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.is_symlink() or dest.exists():
                dest.unlink()
            os.symlink(m.linkname, dest)
            return
    raise FileNotFoundError(f"no file in the archive for {dest}")


def copy_in_target(src: Path, dest: str, owner: str | None) -> tuple[Path, PurePosixPath, int, int, str | None]:
    """Checks and parses `copy_in`'s arguments, shared by the backends that copy a tar in: (src, dest path,
    uid, gid, owner name to chown to afterwards — None when `owner` is numeric or absent)."""
    src = Path(src)
    if not src.exists():
        raise FileNotFoundError(src)
    dest_p = PurePosixPath(dest)
    if not dest_p.is_absolute() or dest_p == PurePosixPath("/"):
        raise ValueError(f"copy_in destination must be an absolute path other than /, got {dest!r}")
    if owner is None:
        return src, dest_p, 0, 0, None
    u, _, g = str(owner).partition(":")
    if u.isdigit() and (not g or g.isdigit()):
        return src, dest_p, int(u), int(g or u), None
    return src, dest_p, 0, 0, str(owner)
