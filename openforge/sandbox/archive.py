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


def extract_archive(tf: tarfile.TarFile, dest: Path, *, is_dir: bool) -> None:
    """Extract a `docker cp`-style archive (one top entry named after the source) into `dest`: a file to
    `dest`, a directory's contents into `dest`. Unsafe members (absolute or `..` paths, links out of `dest`,
    devices) are skipped."""
    dest = Path(dest)
    if not is_dir:
        for m in tf:
            if m.isfile():
                dest.parent.mkdir(parents=True, exist_ok=True)
                f = tf.extractfile(m)
                with open(dest, "wb") as out:
                    if f is not None:
                        shutil.copyfileobj(f, out)
                os.chmod(dest, m.mode & 0o755 | 0o600)
                return
            if m.issym():
                dest.parent.mkdir(parents=True, exist_ok=True)
                if dest.is_symlink() or dest.exists():
                    dest.unlink()
                os.symlink(m.linkname, dest)
                return
        raise FileNotFoundError(f"no file in the archive for {dest}")
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    dir_modes: list[tuple[Path, int]] = []
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
        if m.isdir():
            target.mkdir(parents=True, exist_ok=True)
            dir_modes.append((target, m.mode & 0o777 | 0o700))
        elif m.isfile():
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            f = tf.extractfile(m)
            with open(target, "wb") as out:
                if f is not None:
                    shutil.copyfileobj(f, out)
            os.chmod(target, m.mode & 0o755 | 0o600)
        elif m.issym():
            link = PurePosixPath(m.linkname)
            resolved = (target.parent / m.linkname).resolve() if not link.is_absolute() else None
            if resolved is None or not (resolved == root or root in resolved.parents):
                continue  # absolute or escaping link: skipped
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            os.symlink(m.linkname, target)
        # hard links, devices, fifos: skipped
    for d, mode in reversed(dir_modes):
        try:
            os.chmod(d, mode)
        except OSError:
            pass


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
