"""A task's build context is a third party's directory: before anything of it is copied or built, check that
it cannot bring in host files or exhaust the host (docs/design.md, invariant 7).

`check_build_context` refuses, naming the file:

- a symbolic link whose target lies outside the context (`environment/leak -> /root/.ssh/id_rsa`, `../..`),
  or that does not resolve (a loop); links inside the context are kept as links;
- anything but regular files, directories and such links (FIFOs block a copy, devices read host hardware);
- a context larger than `max_bytes` (the largest files are named);
- a context directory that is itself a link out of the task directory (`within`).

It is called where task directories are inspected (`openforge tasks validate`, loading tasks: a configuration
error reported once, before any work) and again by the Docker backend right before it copies the context.
"""

from __future__ import annotations

import os
import stat as statmod
from pathlib import Path

from openforge.core.errors import TaskError

__all__ = ["DEFAULT_MAX_CONTEXT_BYTES", "BuildContextError", "check_build_context"]

DEFAULT_MAX_CONTEXT_BYTES = 1 << 30  # 1 GiB


class BuildContextError(TaskError, ValueError):
    """The build context cannot be used; the message names the file and what to do."""


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def check_build_context(
    context: Path, *, within: Path | None = None, max_bytes: int = DEFAULT_MAX_CONTEXT_BYTES
) -> int:
    """Check the build context directory `context` (see the module docstring); its total size in bytes.
    `within`: a directory the context must really lie in (the task directory)."""
    context = Path(context)
    root = context.resolve()
    if within is not None and not root.is_relative_to(Path(within).resolve()):
        raise BuildContextError(
            f"{context}: resolves to {root}, outside the task directory; make it a real directory of the task"
        )
    if not root.is_dir():
        raise BuildContextError(f"{context}: not a directory")
    total = 0
    files: list[tuple[int, str]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for n in sorted(dirnames + filenames):
            p = Path(dirpath) / n
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if statmod.S_ISLNK(st.st_mode):
                target = os.readlink(p)
                try:
                    real = p.resolve(strict=True)
                except (OSError, RuntimeError):
                    raise BuildContextError(
                        f"{context}/{rel}: a symbolic link to {target} that does not resolve "
                        "(missing, or a loop); remove it"
                    ) from None
                if real != root and not real.is_relative_to(root):
                    raise BuildContextError(
                        f"{context}/{rel}: a symbolic link to {target}, outside the build context: it would "
                        "bring a host file into the image; copy the file into environment/ instead"
                    )
            elif statmod.S_ISREG(st.st_mode):
                total += st.st_size
                files.append((st.st_size, rel))
            elif not statmod.S_ISDIR(st.st_mode):
                raise BuildContextError(
                    f"{context}/{rel}: not a regular file, directory or symbolic link "
                    "(a device, FIFO or socket); remove it"
                )
    if total > max_bytes:
        largest = ", ".join(f"{rel} ({_size(n)})" for n, rel in sorted(files, reverse=True)[:5])
        raise BuildContextError(
            f"{context}: the build context holds {_size(total)}, more than the "
            f"{_size(max_bytes)} allowed; the largest files: {largest}"
        )
    return total
