"""Content hashes of directory trees, computed without following links: a task's build context (the docker
backend's image tag, `openforge.sandbox.docker.images`) and a whole task directory (`task_content_hash`: the
key of what is learnt once per task, e.g. whether its verifier runs on the untouched initial state,
`openforge.rollout.attribution`)."""

from __future__ import annotations

import hashlib
import os
import stat as statmod
from collections.abc import Mapping
from pathlib import Path

from openforge.tasks.model import Task

__all__ = ["TASK_SALT", "task_content_hash", "tree_digest"]

TASK_SALT = b"openforge-task-v1\x00"


def tree_digest(root: Path, salt: bytes, replaced: Mapping[str, bytes] | None = None) -> str:
    """sha256 (after `salt`) over every path below `root` (sorted), its type, permission bits and content
    (symlinks: their target, never followed); a regular file whose relative path is in `replaced` counts with
    that content instead of its own (a Dockerfile as rewritten by the image map)."""
    h = hashlib.sha256(salt)
    replaced = replaced or {}
    entries: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for n in dirnames + sorted(filenames):
            entries.append(Path(dirpath) / n)
    for p in sorted(entries, key=lambda q: q.relative_to(root).as_posix()):
        rel = p.relative_to(root).as_posix()
        st = p.lstat()
        if statmod.S_ISLNK(st.st_mode):
            h.update(b"L" + rel.encode() + b"\x00" + os.readlink(p).encode() + b"\x00")
        elif statmod.S_ISDIR(st.st_mode):
            h.update(b"D" + rel.encode() + b"\x00" + f"{st.st_mode & 0o7777:o}".encode() + b"\x00")
        elif statmod.S_ISREG(st.st_mode):
            h.update(b"F" + rel.encode() + b"\x00" + f"{st.st_mode & 0o7777:o}".encode() + b"\x00")
            if rel in replaced:
                data = replaced[rel]
                h.update(str(len(data)).encode() + b"\x00" + data)
            else:
                h.update(str(st.st_size).encode() + b"\x00")
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
    return h.hexdigest()


def task_content_hash(task: Task) -> str:
    """The hash of everything the task directory holds (task.toml, instruction, environment, tests, solution):
    two loads of the same content have the same hash, wherever the directory lies."""
    return tree_digest(task.path, TASK_SALT)
