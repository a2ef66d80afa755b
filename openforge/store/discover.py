"""Where a run directory's trajectory stores are, whatever its layout: a `rollout` / `eval` run holds one
(RUN/trajectories.db), a `train` run several (RUN/teacher, RUN/rl, RUN/eval/after-N), the quickstart its sub-runs,
a veRL job one per worker (RUN/worker-<host>-<pid>), task curation one per difficulty round. `openforge analyze`,
`openforge view` and the ATIF export all find them here.
"""

from __future__ import annotations

import os
from pathlib import Path

from openforge.store.store import DB_FILENAME

# Folders that hold no stores of the run but may hold many files (generated tasks, weights): not walked.
SKIPPED_DIRS = frozenset({"tasks", "checkpoints", "model", "models", "node_modules", ".git", "__pycache__"})
MAX_DEPTH = 4  # levels below the run directory: the deepest layout above is 2


def find_stores(root: str | os.PathLike[str]) -> list[Path]:
    """Every directory under `root` (itself included, `MAX_DEPTH` levels down) that holds a trajectories.db:
    the run directory first, then in the order of their paths relative to it. Hidden folders, symbolic links
    and `SKIPPED_DIRS` are not walked."""
    base = Path(root).resolve()
    found: list[Path] = []
    for here, dirs, files in os.walk(base):
        depth = len(Path(here).relative_to(base).parts)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIPPED_DIRS
            and not d.startswith(".")
            and depth < MAX_DEPTH
            and not os.path.islink(os.path.join(here, d))
        )
        if DB_FILENAME in files:
            found.append(Path(here))
    return sorted(found, key=lambda p: (p != base, p.relative_to(base).as_posix()))
