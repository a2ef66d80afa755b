"""Where a run directory's stores are: one walk (`openforge.store.find_stores`), which `openforge analyze` and the
viewer (and so the ATIF export) both use, over the layouts the commands write."""

from __future__ import annotations

import os

from openforge.analysis import analyze_run
from openforge.store import TrajectoryStore, find_stores
from openforge.view.discover import discover

FOUND = [".", "eval-base", "eval/after-000001", "eval/base+faults", "rl", "teacher", "w/x/y/z", "worker-host-1"]


def test_every_layout_found_once_and_the_rest_left_alone(tmp_path):
    root = tmp_path / "run"
    for label in FOUND + ["tasks/heldout/t1", "checkpoints/rl", ".cache/old", "w/x/y/z/too-deep"]:
        TrajectoryStore.open(root / label).close()
    os.symlink(root / "rl", root / "linked")  # a link to a store: walked once, where it lives
    stores = find_stores(root)
    assert [p.relative_to(root.resolve()).as_posix() for p in stores] == FOUND  # the run first, then by path
    assert [s.label for s in discover(root).stores] == FOUND  # the viewer
    assert [s.store for s in analyze_run(root).stores] == FOUND  # openforge analyze
    assert find_stores(tmp_path / "empty") == []
