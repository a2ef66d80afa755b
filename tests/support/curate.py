"""Helpers for the curation tests (no tests here): the example scripted generator's known mix and where each
of its candidates must end."""

from __future__ import annotations

import importlib.util
from functools import cache

from support.paths import REPO

EXAMPLE = REPO / "examples" / "curate"
SCRIPTED_GENERATOR = EXAMPLE / "scripted_generator.py"
SCRIPTED_SOLVER = EXAMPLE / "scripted_solver.py"
SEEDS = [REPO / "examples" / "tasks" / "train" / "append-setting", REPO / "examples" / "tasks" / "train" / "backup-csv"]

# lineage → (its last version's id, status, stage it was rejected at, reason)
EXPECTED = {
    "cand-0000": ("cand-0000", "accepted", None, None),
    "cand-0001": ("cand-0001", "accepted", None, None),
    "cand-0002": ("cand-0002", "accepted", None, None),
    "cand-0003": ("cand-0003", "rejected", "select", "too_hard"),
    "cand-0004": ("cand-0004", "rejected", "build", "build_failed"),
    "cand-0005": ("cand-0005", "rejected", "test", "oracle_failed"),
    "cand-0006": ("cand-0006", "rejected", "test", "solved_by_doing_nothing"),
    "cand-0007": ("cand-0007", "rejected", "test", "hackable"),
    "cand-0008": ("cand-0008", "rejected", "prune", "duplicate"),
    "cand-0009": ("cand-0009-r1", "accepted", None, None),
    "cand-0010": ("cand-0010", "rejected", "prune", "leaks_tests"),
}


@cache
def mix() -> list[dict[str, str]]:
    """The scripted generator's candidates' files, in order."""
    spec = importlib.util.spec_from_file_location("scripted_generator_for_tests", SCRIPTED_GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MIX
