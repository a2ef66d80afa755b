"""`openforge analyze RUN_DIR`: behaviour metrics of every trajectory store under a run directory.

A run directory holds one store (`rollout`, `eval`) or several (`train`: teacher/, rl/, eval/after-N/;
`quickstart`; veRL worker stores), found by `openforge.store.find_stores`. Each is analysed on its own, per
episode, per harness, per task and overall, over its final episodes (`TrajectoryStore.final_episodes`, the
store's one rule). The reference for coverage and efficiency is the oracle's episode of the same (task,
harness): from `--reference DIR`, or else the run's own `teacher/` store when it has one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from openforge.analysis.metrics import BehaviourSummary, EpisodeBehaviour, behaviour, summarise
from openforge.analysis.trace import EpisodeTrace, trace_calls
from openforge.core import Episode, Outcome
from openforge.harness import ADAPTERS, get_adapter
from openforge.harness.base import HarnessAdapter, Launch, LaunchContext
from openforge.store import DB_FILENAME, NotARunError, TrajectoryStore, find_stores


class StoreAnalysis(BaseModel):
    store: str  # relative to the run directory ("." for the run itself)
    overall: BehaviourSummary
    per_harness: dict[str, BehaviourSummary]
    per_task: dict[str, BehaviourSummary]
    episodes: list[EpisodeBehaviour]


class RunAnalysis(BaseModel):
    run: str
    reference: str | None
    stores: list[StoreAnalysis]

    def store(self, name: str) -> StoreAnalysis | None:
        return next((s for s in self.stores if s.store == name), None)


def _adapter(harness: str | None) -> HarnessAdapter:
    return get_adapter(harness) if harness in ADAPTERS else _Unknown()


class _Unknown(HarnessAdapter):
    """A harness this version does not know: only its error flags count, every tool is `other`."""

    name = "unknown"

    def launch(self, ctx: LaunchContext) -> Launch:  # pragma: no cover - never launched
        raise NotImplementedError

    def parse_transcript(self, stdout: str) -> dict[str, Any]:  # pragma: no cover
        return {}


def trace_episode(store: TrajectoryStore, episode: Episode) -> EpisodeTrace:
    return trace_calls(store.list_calls(episode.id), _adapter(episode.harness))


def reference_traces(store_dir: Path) -> dict[tuple[str | None, str | None], EpisodeTrace]:
    """(task, harness) → the trace of a passed episode in the reference store."""
    out: dict[tuple[str | None, str | None], EpisodeTrace] = {}
    with TrajectoryStore.open(store_dir) as store:
        for e in store.final_episodes():
            if e.outcome is Outcome.passed and (e.task, e.harness) not in out:
                out[(e.task, e.harness)] = trace_episode(store, e)
    return out


def _needed(episode: Episode) -> set[str] | None:
    task = episode.metadata.get("task")
    declared = task.get("required_tools") if isinstance(task, dict) else None
    return set(declared) if declared else None


def analyze_store(
    store_dir: Path, run_dir: Path, references: dict[tuple[str | None, str | None], EpisodeTrace] | None = None
) -> StoreAnalysis:
    references = references or {}
    items: list[EpisodeBehaviour] = []
    with TrajectoryStore.open(store_dir) as store:
        for e in store.final_episodes():
            trace = trace_episode(store, e)
            items.append(behaviour(e, trace, needed=_needed(e), reference=references.get((e.task, e.harness))))
    per_harness = {h: summarise([b for b in items if b.harness == h]) for h in sorted({str(b.harness) for b in items})}
    per_task = {t: summarise([b for b in items if b.task == t]) for t in sorted({str(b.task) for b in items})}
    name = str(store_dir.relative_to(run_dir)) if store_dir != run_dir else "."
    return StoreAnalysis(
        store=name, overall=summarise(items), per_harness=per_harness, per_task=per_task, episodes=items
    )


def analyze_run(run_dir: Path, reference: Path | None = None) -> RunAnalysis:
    run_dir = Path(run_dir).resolve()
    stores = find_stores(run_dir)
    if not stores:
        raise NotARunError(f"no trajectory store ({DB_FILENAME}) under {run_dir}")
    if reference is None and (run_dir / "teacher" / DB_FILENAME).is_file():
        reference = run_dir / "teacher"
    refs = reference_traces(Path(reference)) if reference is not None else {}
    return RunAnalysis(
        run=str(run_dir),
        reference=str(reference) if reference else None,
        stores=[analyze_store(s, run_dir, refs) for s in stores],
    )


__all__ = ["RunAnalysis", "StoreAnalysis", "analyze_run", "analyze_store"]
