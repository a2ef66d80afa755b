"""One process per run directory: a second `rollout`, `train` or `quickstart` on the same `--run` would clean up
the first one's sandboxes (they share the run's label) and interleave its records, so it is refused."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from openforge.core.errors import ConfigurationError

LOCK_FILE = ".openforge.lock"


class RunDirBusy(ConfigurationError, RuntimeError):
    """Another process holds the run directory."""


@contextmanager
def locked_run_dir(run: Path) -> Iterator[Path]:
    """Hold `run` (created if missing) for this process until the block ends; RunDirBusy if another process
    holds it. The lock is the kernel's (flock), so a crashed holder never leaves it stuck."""
    run = Path(run)
    run.mkdir(parents=True, exist_ok=True)
    handle = open(run / LOCK_FILE, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise RunDirBusy(
            f"run directory {run} is in use by {holder}: wait for it to finish, or choose another --run directory"
        ) from None
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        yield run
    finally:
        handle.close()
