"""Behaviour analytics: what an agent did in its episodes, measured from the recorded calls alone.

`trace` rebuilds an episode's tool steps from the requests its harness sent (through each harness's own tool
taxonomy, `openforge.harness.tools`); `metrics` turns them into per-episode behaviour and aggregates (error
recovery, self-verification, tool coverage, format robustness, step efficiency, tool mix); `run` analyses
every store of a run directory; `report` writes analysis.json / .md / .png.
"""

from openforge.analysis.metrics import BehaviourSummary, EpisodeBehaviour, behaviour, summarise
from openforge.analysis.report import write_analysis
from openforge.analysis.run import RunAnalysis, StoreAnalysis, analyze_run, analyze_store
from openforge.analysis.trace import EpisodeTrace, ToolStep, trace_calls

__all__ = [
    "BehaviourSummary",
    "EpisodeBehaviour",
    "EpisodeTrace",
    "RunAnalysis",
    "StoreAnalysis",
    "ToolStep",
    "analyze_run",
    "analyze_store",
    "behaviour",
    "summarise",
    "trace_calls",
    "write_analysis",
]
