"""Helpers for the curation tests (no tests here): the example scripted generator's known mix and where each
of its candidates must end."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import pytest

from openforge.curate import hacks as curate_hacks
from openforge.rollout.hacks import select_hacks
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

# The built-in hacks a test's curation runs (the candidate's own `touch-mentioned-paths` is added to them): one of
# each kind the suite's runner treats apart (plain, hiding a failure, needing the reference solution and its
# control, needing the preload library). Each hack is a fresh sandbox; the whole suite (37) against a candidate
# that grades soundly is ~25 s here. The whole suite against a curated candidate:
# tests/curate/test_pipeline.py::test_the_hack_suite_is_one_switch; against the shipped tasks:
# tests/rollout/test_reward_hacks.py.
ROUTING_HACKS = "planted-reward,shadow-unittest,chmod-workdir,shrink-input-data,ld-preload"


@contextmanager
def routing_hacks() -> Iterator[None]:
    """Curation, within, runs `ROUTING_HACKS` as its built-in suite."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(curate_hacks, "HACKS", tuple(select_hacks(ROUTING_HACKS)))
        yield


@cache
def mix() -> list[dict[str, str]]:
    """The scripted generator's candidates' files, in order."""
    spec = importlib.util.spec_from_file_location("scripted_generator_for_tests", SCRIPTED_GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MIX
