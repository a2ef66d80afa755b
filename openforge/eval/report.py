"""The evaluation report of a run: pass@k and pass^k (overall, per harness, per task), outcome classes, mean
calls and tokens per episode; a rich table, `report.md` and `report.json` in the run directory.

Only final episodes count (`TrajectoryStore.final_episodes`, the store's one rule: each slot's last attempt, once
it has an outcome); infrastructure failures among them are counted by class but are not samples.
Behaviour (`openforge.analysis`: error recovery, self-verification, tool mix, format errors, steps) is part of
the report (`behaviour`, `behaviour_by_harness`; `analysis.png` is its plot). With `--faults`, the same
evaluation runs again with faults injected (RUN/faults): `with_faults` is its report and `robustness` the
comparison (`openforge.eval.robustness`).

Replies the harness got cut off by a length cap (finish_reason `length`) or that the proxy could not parse
(a tool call it could not read) are counted, and each episode that had one is listed with the reason: an
agent failing because its reply was cut is not the same as an agent solving the task wrongly. Episodes graded
`failed` because the agent tampered with what the verifier runs (`openforge.rollout.tamper`) are counted and
listed with the paths, and so are episodes whose grading could not make every check (`grading_notes`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from openforge.analysis import RunAnalysis, StoreAnalysis
from openforge.analysis.report import COLUMNS, cell
from openforge.core import GRADED_OUTCOMES, Episode, FinishReason, Outcome
from openforge.core.json_types import JSONObject
from openforge.eval.metrics import pass_table, task_counts
from openforge.eval.robustness import FAULTS_DIR, robustness, robustness_markdown
from openforge.rollout.gate_report import validation_summary
from openforge.store import TrajectoryStore


def build_report(store: TrajectoryStore) -> dict[str, Any]:
    episodes = store.final_episodes()
    graded = [e for e in episodes if e.outcome in GRADED_OUTCOMES]
    outcomes = Counter(e.outcome.value for e in episodes if e.outcome)
    report: dict[str, Any] = {
        "episodes": len(episodes),
        "graded": len(graded),
        "outcomes": {o.value: outcomes.get(o.value, 0) for o in Outcome},
        # the unit is (task, harness): samples of one task by different harnesses are not samples of one policy
        **pass_table(task_counts((f"{e.task}|{e.harness}", e.outcome == Outcome.passed) for e in graded)),
        "by_harness": {},
        "by_task": {},
        "failures": [
            {"task": e.task, "harness": e.harness, "outcome": e.outcome.value, "reason": e.outcome_reason}
            for e in episodes
            if e.outcome and e.outcome.is_infrastructure_failure
        ],
        **reply_problems(store, episodes),
        **tampering(episodes),
    }
    by_harness: dict[str, list[Episode]] = defaultdict(list)
    for e in graded:
        by_harness[e.harness or "?"].append(e)  # the runners name both; an episode made by hand may not
    for harness, eps in sorted(by_harness.items()):
        report["by_harness"][harness] = {
            "episodes": len(eps),
            **pass_table(task_counts((e.task or "?", e.outcome == Outcome.passed) for e in eps)),
            **_usage(store, eps),
        }
    by_task: dict[str, list[Episode]] = defaultdict(list)
    for e in graded:
        by_task[e.task or "?"].append(e)
    for task, eps in sorted(by_task.items()):
        n, c = len(eps), sum(e.outcome == Outcome.passed for e in eps)
        report["by_task"][task] = {"samples": n, "passed": c, **pass_table({task: (n, c)})}
    report.update(_usage(store, graded))
    return report


def reply_problems(store: TrajectoryStore, episodes: list[Episode]) -> dict[str, Any]:
    """Main-line replies cut off by a length cap or not parsed, counted over `episodes`, and one entry per
    episode that had any: `{"task", "harness", "sample", "outcome", "reason"}`."""
    capped = unparsed = 0
    listed = []
    for e in episodes:
        calls = [c for c in store.list_calls(e.id) if not c.side_call and not c.call_error]
        cut = [c for c in calls if c.finish_reason == FinishReason.length]
        bad = [c for c in calls if c.parse_error]
        capped, unparsed = capped + len(cut), unparsed + len(bad)
        if not cut and not bad:
            continue
        reasons = []
        if cut:
            caps = sorted({c.sampling.max_tokens for c in cut})
            reasons.append(
                f"{len(cut)} of {len(calls)} replies cut off by a length cap (finish_reason length; "
                f"max_tokens {', '.join(map(str, caps))}, or the context window)"
            )
        if bad:
            reasons.append(f"{len(bad)} of {len(calls)} replies not parsed: {bad[0].parse_error}")
        listed.append(
            {
                "task": e.task,
                "harness": e.harness,
                "sample": e.sample,
                "outcome": e.outcome.value if e.outcome else None,
                "reason": "; ".join(reasons),
            }
        )
    return {"length_capped_calls": capped, "parse_error_calls": unparsed, "reply_problems": listed}


def is_tampered(e: Episode) -> bool:
    """Graded `failed` for tampering (the same test as the store's `tampered` flag)."""
    return bool(e.metadata.get("tampered")) or (e.outcome_reason or "").startswith("tampered")


def tampering(episodes: list[Episode]) -> dict[str, Any]:
    """How many of `episodes` tampered with the verifier, each listed with its reason; and the episodes whose
    grading could not make every check."""
    listed = [
        {
            "task": e.task,
            "harness": e.harness,
            "sample": e.sample,
            "reason": e.outcome_reason,
            "paths": list(e.metadata.get("tampered") or []),
        }
        for e in episodes
        if is_tampered(e)
    ]
    notes = [
        {"task": e.task, "harness": e.harness, "sample": e.sample, "notes": list(e.metadata["grading_notes"])}
        for e in episodes
        if e.metadata.get("grading_notes")
    ]
    return {"tampered": len(listed), "tampered_episodes": listed, "grading_notes": notes}


def _usage(store: TrajectoryStore, episodes: list[Episode]) -> dict[str, float | None]:
    """Mean model calls, prompt tokens (new ones only: prompts extend each other) and sampled tokens."""
    if not episodes:
        return {"mean_calls": None, "mean_output_tokens": None}
    calls = outputs = 0
    for e in episodes:
        records = store.list_calls(e.id)
        calls += len(records)
        outputs += sum(len(c.output_ids) for c in records)
    return {"mean_calls": calls / len(episodes), "mean_output_tokens": outputs / len(episodes)}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def report_markdown(report: dict[str, Any], analysis: StoreAnalysis | None = None) -> str:
    lines = [
        "# Evaluation report",
        "",
        f"{report['episodes']} episodes, {report['graded']} graded.",
        *(["", line] if (line := validation_summary(report.get("task_validation"))) else []),
        "",
        "| k | pass@k | pass^k |",
        "|---|---|---|",
    ]
    for k in report["pass_at_k"]:
        lines.append(f"| {k} | {_pct(report['pass_at_k'][k])} | {_pct(report['pass_hat_k'][k])} |")
    lines += ["", "## Outcomes", "", "| outcome | episodes |", "|---|---|"]
    lines += [f"| {o} | {n} |" for o, n in report["outcomes"].items()]
    lines += [
        "",
        "## By harness",
        "",
        "| harness | episodes | pass@1 | mean calls | mean sampled tokens |",
        "|---|---|---|---|---|",
    ]
    for h, r in report["by_harness"].items():
        lines.append(
            f"| {h} | {r['episodes']} | {_pct(r['pass_at_k'].get('1'))} | {r['mean_calls']:.1f} | "
            f"{r['mean_output_tokens']:.0f} |"
        )
    lines += ["", "## By task", "", "| task | samples | passed | pass@1 |", "|---|---|---|---|"]
    for t, r in report["by_task"].items():
        lines.append(f"| {t} | {r['samples']} | {r['passed']} | {_pct(r['pass_at_k'].get('1'))} |")
    if report["reply_problems"]:
        lines += [
            "",
            f"## Replies cut off or not parsed ({report['length_capped_calls']} cut off by a length cap, "
            f"{report['parse_error_calls']} not parsed)",
            "",
        ]
        lines += [
            f"- {p['task']} / {p['harness']} (sample {p['sample']}): **{p['outcome']}** — {p['reason']}"
            for p in report["reply_problems"]
        ]
    if report.get("tampered_episodes"):
        lines += ["", f"## Tampering with the verifier ({report['tampered']} episodes, graded failed)", ""]
        lines += [
            f"- {t['task']} / {t['harness']} (sample {t['sample']}): {t['reason']}" for t in report["tampered_episodes"]
        ]
    if report.get("grading_notes"):
        lines += ["", "## Checks grading could not make", ""]
        lines += [
            f"- {n['task']} / {n['harness']} (sample {n['sample']}): {'; '.join(n['notes'])}"
            for n in report["grading_notes"]
        ]
    if report["failures"]:
        lines += ["", "## Infrastructure failures (not counted as samples)", ""]
        lines += [f"- {f['task']} / {f['harness']}: **{f['outcome']}** — {f['reason']}" for f in report["failures"]]
    if analysis is not None:
        lines += behaviour_markdown(analysis)
    if "robustness" in report:
        lines += robustness_markdown(report["robustness"])
    return "\n".join(lines) + "\n"


def write_report(
    store: TrajectoryStore,
    run_dir: Path,
    console: Console | None = None,
    analysis: RunAnalysis | None = None,
    faults: str | None = None,
    validation: JSONObject | None = None,
) -> dict[str, Any]:
    """report.json and report.md of the run in `run_dir`; with `analysis` (of the run directory) the behaviour
    sections; with `faults` (the spec) the evaluation with faults in RUN/faults beside it; with `validation`
    (the tasks' check against the reward hacks, `openforge.rollout.task_gate`) what it found and left out."""
    report = build_report(store)
    if validation is not None:
        report["task_validation"] = validation
    main = analysis.store(".") if analysis is not None else None
    if main is not None:
        report["behaviour"] = main.overall.model_dump(mode="json")
        report["behaviour_by_harness"] = {h: s.model_dump(mode="json") for h, s in main.per_harness.items()}
    if faults is not None:
        faulted_store = analysis.store(FAULTS_DIR) if analysis is not None else None
        with TrajectoryStore.open(run_dir / FAULTS_DIR) as fstore:
            report["with_faults"] = build_report(fstore)
            episodes = fstore.final_episodes()
        if faulted_store is not None:
            report["robustness"] = robustness(faults, report, report["with_faults"], episodes, faulted_store)
    (run_dir / "report.json").write_text(json.dumps(report, indent=2))
    (run_dir / "report.md").write_text(report_markdown(report, main))
    if console is not None:
        console.print(report_table(report))
    return report


def behaviour_markdown(analysis: StoreAnalysis) -> list[str]:
    """The behaviour table (overall and per harness) of one store."""
    lines = [
        "",
        "## Behaviour",
        "",
        "From the recorded calls (`openforge analyze`; definitions in the README).",
        "",
        "| | " + " | ".join(c for c, _, _ in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    groups = [("all", analysis.overall)] + list(analysis.per_harness.items())
    lines += [f"| {name} | " + " | ".join(cell(s, f, k) for _, f, k in COLUMNS) + " |" for name, s in groups]
    return lines + ["", "![behaviour](analysis.png)"]


def report_table(report: dict[str, Any]) -> Table:
    table = Table(title=f"{report['episodes']} episodes ({report['graded']} graded)")
    table.add_column("harness")
    ks = list(report["pass_at_k"])
    for k in ks:
        table.add_column(f"pass@{k}", justify="right")
    for k in ks:
        table.add_column(f"pass^{k}", justify="right")
    table.add_column("mean calls", justify="right")
    rows = [("all", report)] + list(report["by_harness"].items())
    for name, r in rows:
        table.add_row(
            name,
            *[_pct(r["pass_at_k"].get(k)) for k in ks],
            *[_pct(r["pass_hat_k"].get(k)) for k in ks],
            "-" if r.get("mean_calls") is None else f"{r['mean_calls']:.1f}",
        )
    outcomes = ", ".join(f"{o}={n}" for o, n in report["outcomes"].items() if n)
    table.caption = f"outcomes: {outcomes}"
    if report.get("tampered"):
        table.caption += f"; tampered with the verifier: {report['tampered']} (report.md lists them)"
    if (line := validation_summary(report.get("task_validation"))) is not None:
        table.caption += f"; {line}"
    if "robustness" in report:
        r = report["robustness"]
        table.caption += (
            f"; with faults ({r['faults']}): pass@1 {_pct(r['pass_at_k']['with_faults'].get('1'))}, "
            f"recovery {_pct(r['recovery_rate'])}"
        )
    if report["length_capped_calls"] or report["parse_error_calls"]:
        table.caption += (
            f"; replies cut off by a length cap: {report['length_capped_calls']}, not parsed: "
            f"{report['parse_error_calls']} (report.md lists the episodes)"
        )
    return table
