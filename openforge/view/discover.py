"""What a run directory holds: its trajectory stores (`openforge.store.find_stores`, whatever the layout)
and the files the commands write next to them (report.json, steps.jsonl, evals.jsonl, analysis.json).

Layouts it meets: a `rollout` / `eval` run (RUN/trajectories.db, report.json), a `train` run (RUN/teacher,
RUN/rl, RUN/eval/after-N, steps.jsonl, evals.jsonl), the quickstart's sub-runs (teacher, rl, eval-base, ...),
a veRL job's worker stores (RUN/worker-<host>-<pid>). Each store is named by its path relative to the run
(`.` for the run directory itself).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforge.store import DB_FILENAME, NotARunError, find_stores
from openforge.store.discover import MAX_DEPTH
from openforge.train.records import EVALS_FILE, STEPS_FILE

REPORT_FILE = "report.json"
ANALYSIS_FILE = "analysis.json"
_MAX_JSON_BYTES = 64 << 20


@dataclass(frozen=True)
class StoreRef:
    """One trajectory store of a run."""

    label: str  # path relative to the run directory; "." for the run directory itself
    path: Path  # the directory holding trajectories.db

    @property
    def title(self) -> str:
        """How pages name it: its label, or "run directory" for the run's own store."""
        return "run directory" if self.label == "." else self.label

    @property
    def kind(self) -> str:
        """What made it, from its place in the run: teacher, rl, eval, worker (veRL) or run."""
        first = self.label.split("/", 1)[0]
        if first.startswith("worker-"):
            return "worker"
        if first.startswith("eval"):
            return "eval"
        if first in ("teacher", "rl"):
            return first
        return "run"


@dataclass
class RunFiles:
    """The JSON a command wrote in a directory (None / [] when absent or unreadable)."""

    report: dict[str, Any] | None = None
    analysis: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # files that could not be read, and why


@dataclass
class Run:
    path: Path
    stores: list[StoreRef]
    files: RunFiles

    @property
    def name(self) -> str:
        return self.path.name or str(self.path)

    @property
    def kind(self) -> str:
        """train, quickstart, verl, eval or rollout (a guess from the files, for the page's wording)."""
        report = self.files.report or {}
        if self.files.steps or "grpo_steps" in report or "rl_steps" in report:  # rl_steps: earlier reports
            return "train"
        if isinstance(report.get("heldout_pass_at_1"), dict):
            return "quickstart"
        if any(s.kind == "worker" for s in self.stores):
            return "verl"
        if "pass_at_k" in report:
            return "eval"
        return "rollout"

    def store(self, label: str) -> StoreRef | None:
        return next((s for s in self.stores if s.label == label), None)


def read_files(directory: Path) -> RunFiles:
    files = RunFiles()
    files.report = _read_json(directory / REPORT_FILE, files.problems)
    files.analysis = _read_json(directory / ANALYSIS_FILE, files.problems)
    files.steps = _read_jsonl(directory / STEPS_FILE, files.problems)
    files.evals = _read_jsonl(directory / EVALS_FILE, files.problems)
    return files


def discover(path: str | os.PathLike[str]) -> Run:
    """The run at `path`. Raises `NotARunError` (a FileNotFoundError) when no trajectory store is under it."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise NotARunError(f"{path} is not a directory")
    stores = [StoreRef(store_dir.relative_to(root).as_posix(), store_dir) for store_dir in find_stores(root)]
    if not stores:
        raise NotARunError(f"{path} holds no {DB_FILENAME} (looked {MAX_DEPTH} levels down): is it a run directory?")
    return Run(root, stores, read_files(root))


def _too_big(path: Path, problems: list[str]) -> bool:
    if path.stat().st_size > _MAX_JSON_BYTES:
        problems.append(f"{path.name}: larger than {_MAX_JSON_BYTES >> 20} MiB, not read")
        return True
    return False


def _read_json(path: Path, problems: list[str]) -> dict[str, Any] | None:
    if not path.is_file() or _too_big(path, problems):
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        problems.append(f"{path.name}: {e}")
        return None
    if not isinstance(value, dict):
        problems.append(f"{path.name}: not a JSON object")
        return None
    return value


def _read_jsonl(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    if not path.is_file() or _too_big(path, problems):
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as e:  # a line being written right now, or a damaged one: keep the rest
            problems.append(f"{path.name} line {number}: {e}")
            continue
        if isinstance(value, dict):
            records.append(value)
    return records
