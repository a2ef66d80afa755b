"""`openforge eval --faults SPEC`: the same evaluation with faults injected into the environment, beside the one
without (RUN/faults holds its episodes). pass@k and pass^k with and without faults, pass@k over the episodes
that had a fault put in, recovery per fault kind, and the faults that could not be put in (with why).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from openforge.analysis import StoreAnalysis
from openforge.core import GRADED_OUTCOMES, Episode, Outcome
from openforge.eval.metrics import pass_table, task_counts

FAULTS_DIR = "faults"  # RUN/faults: the evaluation with faults


def injected(episode: Episode) -> bool:
    """Whether a fault was put into the episode's environment (armed and applicable; fired or not)."""
    return any(f.get("applicable") for f in episode.metadata.get("faults") or [])


def robustness(
    spec: str, clean: dict[str, Any], faulted: dict[str, Any], episodes: list[Episode], analysis: StoreAnalysis
) -> dict[str, Any]:
    """The comparison: `clean` / `faulted` are the two runs' reports, `episodes` the faulted run's final
    episodes, `analysis` its behaviour."""
    graded = [e for e in episodes if e.outcome in GRADED_OUTCOMES]
    hit = [e for e in graded if injected(e)]
    not_applicable: dict[str, Counter] = defaultdict(Counter)
    armed: Counter = Counter()
    for e in episodes:
        for f in e.metadata.get("faults") or []:
            armed[f.get("kind")] += 1
            if not f.get("applicable"):
                not_applicable[str(f.get("kind"))][str(f.get("reason"))] += 1
    return {
        "faults": spec,
        "pass_at_k": {"without_faults": clean["pass_at_k"], "with_faults": faulted["pass_at_k"]},
        "pass_hat_k": {"without_faults": clean["pass_hat_k"], "with_faults": faulted["pass_hat_k"]},
        # only the episodes that had a fault put in
        "injected_episodes": len(hit),
        **{
            f"{k}_injected": v
            for k, v in pass_table(
                task_counts((f"{e.task}|{e.harness}", e.outcome == Outcome.passed) for e in hit)
            ).items()
        },
        "recovery_rate": analysis.overall.recovery_rate,
        "met_error": analysis.overall.met_error,
        "by_fault": analysis.overall.recovery_by_fault,
        "armed": dict(armed),
        "not_applicable": {k: dict(v) for k, v in not_applicable.items()},
    }


def robustness_markdown(r: dict[str, Any]) -> list[str]:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    lines = [
        "",
        f"## With faults (`{r['faults']}`)",
        "",
        f"The same evaluation with faults injected into the environment (RUN/{FAULTS_DIR}); "
        f"{r['injected_episodes']} graded episodes had a fault put in.",
        "",
        "| k | pass@k without faults | pass@k with faults | pass@k, episodes with a fault |",
        "|---|---|---|---|",
    ]
    for k in r["pass_at_k"]["with_faults"]:
        lines.append(
            f"| {k} | {pct(r['pass_at_k']['without_faults'].get(k))} | "
            f"{pct(r['pass_at_k']['with_faults'].get(k))} | {pct(r['pass_at_k_injected'].get(k))} |"
        )
    lines += [
        "",
        f"Recovery (passed among graded episodes that met a failed tool result): "
        f"{pct(r['recovery_rate'])} of {r['met_error']}.",
        "",
        "| fault | episodes where it fired | passed | met an error | recovered | recovery rate |",
        "|---|---|---|---|---|---|",
    ]
    for kind, v in r["by_fault"].items():
        lines.append(
            f"| {kind} | {v['episodes']} | {v['passed']} | {v['met_error']} | {v.get('recovered', '-')} | "
            f"{pct(v.get('recovery_rate'))} |"
        )
    if r["not_applicable"]:
        lines += ["", "Faults drawn but not applicable (not injected):", ""]
        lines += [
            f"- {kind}: {n} × {reason}"
            for kind, reasons in r["not_applicable"].items()
            for reason, n in reasons.items()
        ]
    return lines


__all__ = ["FAULTS_DIR", "injected", "robustness", "robustness_markdown"]
