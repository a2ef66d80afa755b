"""The runs a viewer serves: discovered once, re-walked when asked for a store it has not seen (a training run
adds an evaluation store every few steps), with each store opened read-only once and kept open.

Nothing here writes: stores are opened with `readonly=True` (SQLite refuses writes on those connections), and
only directories found under the run directories given on the command line are ever opened — a store is named
by (run number, label), never by a path taken from a request.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openforge.core.errors import RequestError
from openforge.store import Facets, TrajectoryStore
from openforge.view.discover import Run, StoreRef, discover

if TYPE_CHECKING:
    from openforge.view.tokentext import TokenText

_REDISCOVER_AFTER_S = 2.0
_FACETS_FOR_S = 10.0  # the filter menus' values scan the whole episode table: not on every page


class UnknownRun(RequestError, LookupError):
    """A run or store that the viewer does not serve."""


@dataclass
class OpenStore:
    run_index: int
    run: Run
    ref: StoreRef
    store: TrajectoryStore
    model_dir: Path | None  # the tokenizer's directory, when the run names or holds one


class Library:
    """Run directories by number (their order on the command line), their stores opened read-only on demand."""

    def __init__(self, paths: list[Path], model: Path | None = None):
        self.paths = [Path(p).resolve() for p in paths]
        self.runs = [discover(p) for p in self.paths]
        self.model = model
        self._open: dict[tuple[int, str], OpenStore] = {}
        self._tokens: dict[Path, TokenText] = {}
        self._facets: dict[tuple[int, str], tuple[float, Facets]] = {}
        self._lock = threading.Lock()
        self._walked = [time.monotonic()] * len(self.runs)

    # ---- runs and stores ----------------------------------------------------------------------------------

    def run(self, index: int) -> Run:
        if not 0 <= index < len(self.runs):
            raise UnknownRun(f"no run number {index}: this viewer serves {len(self.runs)} run(s)")
        return self.runs[index]

    def refresh(self, index: int) -> Run:
        """Walk the run again (new stores, new steps), at most every few seconds."""
        run = self.run(index)
        if time.monotonic() - self._walked[index] > _REDISCOVER_AFTER_S:
            with self._lock:
                self.runs[index] = run = discover(self.paths[index])
                self._walked[index] = time.monotonic()
        return run

    def open(self, index: int, label: str) -> OpenStore:
        key = (index, label)
        with self._lock:
            found = self._open.get(key)
        if found is not None:
            return found
        run = self.run(index)
        ref = run.store(label) or self.refresh(index).store(label)
        if ref is None:
            raise UnknownRun(f"run {run.name} has no store {label!r}")
        with self._lock:
            if key not in self._open:
                store = TrajectoryStore.open(ref.path, readonly=True)
                self._open[key] = OpenStore(
                    index,
                    self.runs[index],
                    ref,
                    store,
                    self.model or find_model_dir(ref.path, run.path, store.get_run_info()),
                )
            return self._open[key]

    def close(self) -> None:
        with self._lock:
            for opened in self._open.values():
                opened.store.close()
            self._open.clear()

    def facets(self, opened: OpenStore) -> Facets:
        """The store's harnesses, outcomes and steps, re-read at most every few seconds."""
        key = (opened.run_index, opened.ref.label)
        cached = self._facets.get(key)
        if cached is None or time.monotonic() - cached[0] > _FACETS_FOR_S:
            cached = self._facets[key] = (time.monotonic(), opened.store.facets())
        return cached[1]

    # ---- tokenizers ---------------------------------------------------------------------------------------

    def tokens(self, model_dir: Path | None) -> TokenText | None:
        """The `TokenText` of a model directory (loaded once), or None without one."""
        if model_dir is None:
            return None
        with self._lock:
            if model_dir not in self._tokens:
                from openforge.view.tokentext import TokenText

                self._tokens[model_dir] = TokenText.load(model_dir)
            return self._tokens[model_dir]


def find_model_dir(store_dir: Path, run_dir: Path, run_info: dict[str, Any]) -> Path | None:
    """The model directory whose tokenizer the run's calls were rendered with: as the run's metadata names it
    (rollout/eval, train, veRL), else a `model/` directory in the store's directory or above it up to the run
    (train and quickstart build the tiny model there)."""
    named = [run_info.get("model")]
    for section in ("rollout", "train", "verl_agent_loop"):
        value = run_info.get(section)
        if isinstance(value, dict):
            named.append(value.get("model"))
    for candidate in named:
        if isinstance(candidate, str) and candidate not in ("", "tiny") and _is_model_dir(Path(candidate)):
            return Path(candidate)
    here = store_dir.resolve()
    while True:
        if _is_model_dir(here / "model"):
            return here / "model"
        if here == run_dir or here.parent == here or run_dir not in here.parents:
            return None
        here = here.parent


def _is_model_dir(path: Path) -> bool:
    return (path / "tokenizer.json").is_file() and (path / "config.json").is_file()
