"""A training run's curves from the files it writes: steps (steps.jsonl, or the report's step records), held-out
evaluations (evals.jsonl, or the report's `heldout_pass_at_1` list), the quickstart's per-policy held-out
scores (its report's `heldout_pass_at_1` dict), and behaviour metrics (analysis.json) flattened for a table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from openforge.train.records import report_step_records
from openforge.view.charts import Series, bar_chart, line_chart
from openforge.view.discover import RunFiles

MAX_METRIC_ROWS = 400


@dataclass
class Training:
    steps: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)  # {"after_steps", "pass_at_1", ...}
    by_policy: dict[str, float | None] = field(default_factory=dict)  # quickstart: base / sft / rl / sft_more

    @property
    def empty(self) -> bool:
        return not (self.steps or self.evals or self.by_policy)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def training(files: RunFiles) -> Training:
    report = files.report or {}
    steps = files.steps or report_step_records(report)
    heldout = report.get("heldout_pass_at_1")
    evals = files.evals or ([e for e in heldout if isinstance(e, dict)] if isinstance(heldout, list) else [])
    by_policy = {str(k): _number(v) for k, v in heldout.items()} if isinstance(heldout, dict) else {}
    return Training(steps, evals, by_policy)


def _series(
    name: str,
    rows: list[dict[str, Any]],
    x: str,
    y: str,
    scale: Callable[[dict[str, Any], float], float] | None = None,
) -> Series:
    points = []
    for row in rows:
        xv, yv = _number(row.get(x)), _number(row.get(y))
        if xv is not None and yv is not None:
            points.append((xv, scale(row, yv) if scale else yv))
    return Series(name, points)


def _signal_share(row: dict[str, Any], value: float) -> float:
    groups = _number(row.get("groups")) or 0
    return value / groups if groups else 0.0


def charts(t: Training) -> list[Markup]:
    out = []
    if t.steps:
        out.append(
            line_chart(
                "Training reward per step",
                [
                    _series("mean reward", t.steps, "step", "reward"),
                    _series("pass rate", t.steps, "step", "pass_rate"),
                ],
                "RL step",
                y_range=(0.0, 1.0),
                chart_id="chart-reward",
            )
        )
        out.append(
            line_chart(
                "GRPO groups with signal",
                [
                    _series("share of groups", t.steps, "step", "groups_with_signal", _signal_share),
                ],
                "RL step",
                y_range=(0.0, 1.0),
                percent=True,
                chart_id="chart-signal",
            )
        )
        out.append(
            line_chart(
                "Policy version serving each step",
                [
                    _series("policy version", t.steps, "step", "policy_version"),
                ],
                "RL step",
                chart_id="chart-policy",
            )
        )
    if t.evals:
        out.append(
            line_chart(
                "Held-out pass@1 (greedy)",
                [
                    _series("pass@1", t.evals, "after_steps", "pass_at_1"),
                ],
                "RL steps done",
                y_range=(0.0, 1.0),
                percent=True,
                chart_id="chart-heldout",
            )
        )
    if t.by_policy:
        out.append(bar_chart("Held-out pass@1 by policy", list(t.by_policy.items()), chart_id="chart-policies"))
    return out


def flatten(value: Any, prefix: str = "", out: list[tuple[str, Any]] | None = None) -> list[tuple[str, Any]]:
    """Nested JSON as (dotted key, scalar) rows, at most `MAX_METRIC_ROWS` of them (lists of scalars kept whole)."""
    out = [] if out is None else out
    if len(out) >= MAX_METRIC_ROWS:
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            flatten(v, f"{prefix}[{i}]", out)
    else:
        out.append((prefix, value))
    return out[:MAX_METRIC_ROWS]
