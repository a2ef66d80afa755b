"""RUN/report.json, report.md and report.png.

Both evaluations share the body (run, model, harnesses, sandbox, SFT, timings, config) and GRPO's steps:
`grpo_steps` their number, `grpo_step_records` their records (`records.StepRecord`). With `evaluation: curve`
(`openforge train`'s default), `heldout_pass_at_1` is the list of evaluations during GRPO (`{after_steps,
pass_at_1}`). With `evaluation: policies` (the quickstart), `heldout_pass_at_1` maps each policy to its score
(`{"base", "sft", "rl"[, "sft_more"]}`). (Earlier versions named the records `rl_steps` or `steps`:
`records.report_step_records` reads either.)

Behaviour (`openforge.analysis`) rides along: `behaviour` holds each evaluation's summary (per policy, or a
list in order). With `faults.eval`, `heldout_pass_at_1_with_faults` (pass@1 over the held-out episodes that
had a fault put in), `behaviour_with_faults`, `recovery_rate_with_faults` and `recovery_by_fault` (per policy,
or per evaluation) sit beside them.
"""

from __future__ import annotations

import json
import resource
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from openforge.core.json_types import JSONObject, JSONValue
from openforge.rollout.gate_report import validation_summary
from openforge.train.context import RunContext
from openforge.train.plots import plot
from openforge.train.records import GRPO_STEP_RECORDS, GRPO_STEPS, EvalRecord, StepRecord


def build_report(ctx: RunContext, steps: list[StepRecord], evals: list[EvalRecord]) -> JSONObject:
    """RUN/report.json's content (what `run_training` returns)."""
    step_dicts: list[JSONValue] = [s.model_dump(mode="json") for s in steps]
    faults = ctx.config.eval_faults is not None
    evaluation: JSONObject
    if ctx.config.evaluation == "policies":  # every evaluation is a policy's, labelled base, sft, rl, sft_more
        evaluation = {
            "heldout_pass_at_1": {_name(e): e.pass_at_1 for e in evals},
            "heldout_pass_at_1_by_harness": {_name(e): dict(e.pass_at_1_by_harness) for e in evals},
            "behaviour": {_name(e): e.behaviour for e in evals},
        }
        if faults:
            evaluation.update(
                heldout_pass_at_1_with_faults={_name(e): e.pass_at_1_with_faults for e in evals},
                recovery_rate_with_faults={_name(e): _get(e.behaviour_with_faults, "recovery_rate") for e in evals},
                recovery_by_fault={_name(e): _get(e.behaviour_with_faults, "recovery_by_fault") for e in evals},
                behaviour_with_faults={_name(e): e.behaviour_with_faults for e in evals},
            )
    else:
        scored = [e for e in evals if e.pass_at_1 is not None]
        evaluation = {
            "heldout_pass_at_1": [
                {
                    "after_steps": e.after_steps,
                    "pass_at_1": e.pass_at_1,
                    "by_harness": dict(e.pass_at_1_by_harness),
                    **(
                        {
                            "pass_at_1_with_faults": e.pass_at_1_with_faults,
                            "recovery_rate_with_faults": _get(e.behaviour_with_faults, "recovery_rate"),
                        }
                        if faults
                        else {}
                    ),
                }
                for e in evals
            ],
            "final_heldout_pass_at_1": scored[-1].pass_at_1 if scored else None,
            "behaviour": [e.behaviour for e in evals],
        }
        if faults:
            evaluation["behaviour_with_faults"] = [e.behaviour_with_faults for e in evals]
    return {
        **evaluation,
        GRPO_STEPS: len(steps),
        GRPO_STEP_RECORDS: step_dicts,
        "run": str(ctx.run),
        "model": str(ctx.model_path),
        # copies, as JSON (a list[str] is not a list[JSONValue] to a type checker: lists are invariant)
        "harnesses": list(ctx.config.harnesses),
        "eval_harnesses": list(ctx.config.heldout_harnesses),
        "transfer_harnesses": list(ctx.config.transfer_harnesses or []),
        "episode_path": "in-process" if ctx.config.in_process else "orchestrator",
        "sandbox": ctx.sandbox_used,
        "lora": ctx.config.lora.model_dump() if ctx.config.lora else None,
        **off_policy_summary(ctx.config.rl.max_staleness, steps),
        "grpo_cpu": dict(ctx.grpo_cpu) if ctx.grpo_cpu else None,
        # the process's peak resident memory (trainer, engines, proxy): LoRA against full fine-tuning
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "heldout_instances": len(ctx.data.heldout_ids),
        "heldout_task_ids": list(ctx.data.heldout_ids),
        "teacher_episodes": (ctx.sft or {}).get("teacher_episodes"),
        "sft": ctx.sft,
        "timings_s": dict(ctx.timings),
        "task_validation": ctx.validation,
        "faults": (
            {
                "rl": ctx.config.rl_faults.text() if ctx.config.rl_faults else None,
                "eval": ctx.config.eval_faults.text() if ctx.config.eval_faults else None,
            }
            if ctx.config.faults
            else None
        ),
        "config": ctx.config.model_dump(mode="json"),
    }


def off_policy_summary(max_staleness: int, steps: list[StepRecord]) -> JSONObject:
    """Over the run's GRPO steps: the bound, the groups trained by staleness, the groups dropped as staler,
    and the trained steps' episodes' mean wall time and sampled tokens (paced admission must not starve long
    ones)."""
    staleness: dict[str, int] = {}
    for s in steps:
        for age, n in s.staleness.items():
            staleness[age] = staleness.get(age, 0) + n
    episodes = sum(s.episodes for s in steps)
    return {
        "max_staleness": max_staleness,
        "staleness": dict(sorted(staleness.items(), key=lambda kv: int(kv[0]))),
        "stale_groups_dropped": sum(s.stale_groups_dropped for s in steps),
        "mean_episode_s": round(sum(s.episode_seconds_mean * s.episodes for s in steps) / episodes, 3)
        if episodes
        else None,
        "mean_episode_tokens": round(sum(s.tokens for s in steps) / episodes, 1) if episodes else None,
    }


def _evaluated_harnesses(evals: list[EvalRecord]) -> list[str]:
    """The harnesses evaluated, in order, when there are several (one harness needs no column of its own)."""
    names = list(dict.fromkeys(h for e in evals for h in e.pass_at_1_by_harness))
    return names if len(names) > 1 else []


def _get(summary: dict[str, Any] | None, key: str) -> Any:
    return None if summary is None else summary.get(key)


def write_report(
    run: Path, title: str, report: JSONObject, steps: list[StepRecord], evals: list[EvalRecord], console: Console
) -> None:
    (run / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (run / "report.md").write_text(markdown(title, report, steps, evals))
    by_policy = isinstance(report["heldout_pass_at_1"], dict)
    plot(run / "report.png", steps, evals, by_policy)
    table = Table(title="held-out pass@1 (greedy)")
    table.add_column("")
    for e in evals:
        table.add_column(_name(e), justify="right")
    table.add_row("pass@1", *[_pct(e.pass_at_1) for e in evals])
    for harness in _evaluated_harnesses(evals):
        table.add_row(f"  {harness}", *[_pct(e.pass_at_1_by_harness.get(harness)) for e in evals])
    if any(e.behaviour_with_faults is not None for e in evals):
        table.add_row("pass@1 with faults", *[_pct(e.pass_at_1_with_faults) for e in evals])
        table.add_row("recovery with faults", *[_pct(_get(e.behaviour_with_faults, "recovery_rate")) for e in evals])
    console.print(table)
    if (validation := validation_summary(report.get("task_validation"))) is not None:
        console.print(validation)
    console.print(f"report: {run / 'report.md'}, {run / 'report.json'}, {run / 'report.png'}")


def markdown(title: str, report: Mapping[str, Any], steps: list[StepRecord], evals: list[EvalRecord]) -> str:
    intro = (
        f"Model `{report['model']}`, harnesses {', '.join(report['harnesses'])} "
        f"({report['episode_path']} episodes), {len(steps)} GRPO step(s)."
    )
    lines = [f"# {title}", "", intro, ""]
    if (validation := validation_summary(report.get("task_validation"))) is not None:
        lines += [validation, ""]
    if report["sft"]:
        s = report["sft"]
        lines += [
            (
                f"SFT: {s.get('samples')} successful teacher samples, {s.get('steps')} steps, loss "
                f"{s.get('first_loss', 0):.3f} → {s.get('last_loss', 0):.3f}."
            ),
            "",
        ]
        if s.get("selection"):
            lines += [_selection_line(s["selection"], s.get("rerendered") or 0), ""]
    harnesses = _evaluated_harnesses(evals)
    trained = set(report["harnesses"])
    lines += [
        f"Held-out pass@1 on {report['heldout_instances']} held-out tasks/instances (greedy):",
        "",
        "| policy | pass@1 |" + "".join(f" {h}{'' if h in trained else ' (not trained on)'} |" for h in harnesses),
        "|---|---|" + "---|" * len(harnesses),
    ]
    lines += [
        f"| {_name(e)} | {_pct(e.pass_at_1)} |"
        + "".join(f" {_pct(e.pass_at_1_by_harness.get(h))} |" for h in harnesses)
        for e in evals
    ]
    lines += ["", *behaviour_table(evals)]
    lines += [
        "",
        "| step | reward | pass rate | signal | no signal: episodes, s | tokens | trained tokens | merge rate "
        "| policy | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.step} | {r.reward:.3f} | {_pct(r.pass_rate)} | {r.groups_with_signal}/{r.groups} | "
        f"{r.no_signal_episodes}, {r.no_signal_seconds:.0f} | {r.tokens} | {r.trained_tokens} | "
        f"{_pct(r.merge_rate)} | {r.policy_version} | {r.seconds} |"
        for r in steps
    ]
    lines += _difficulty_lines(steps)
    lines += ["", "| phase | seconds |", "|---|---|"] + [f"| {k} | {v} |" for k, v in report["timings_s"].items()]
    lines += ["", "![training reward and held-out pass@1](report.png)"]
    return "\n".join(lines) + "\n"


# (column, summary field, percent?) of the behaviour table
BEHAVIOUR_COLUMNS = [
    ("met error", "met_error", False),
    ("recovery", "recovery_rate", True),
    ("self-verify", "self_verification_rate", True),
    ("parse errors", "parse_error_calls", False),
    ("calls", "mean_calls", False),
    ("tokens", "mean_sampled_tokens", False),
    ("shell share", "shell_share", True),
]


def behaviour_table(evals: list[EvalRecord]) -> list[str]:
    """Markdown lines: each evaluation's behaviour side by side (and with faults, pass@1 and recovery per
    fault kind)."""
    faults = any(e.behaviour_with_faults is not None for e in evals)
    head = ["policy", "condition", *(["pass@1"] if faults else []), *(c for c, _, _ in BEHAVIOUR_COLUMNS)]
    lines = [
        "Behaviour of the held-out episodes (`openforge analyze`; recovery = passed among the graded "
        "episodes that met a failed tool result):",
        "",
        "| " + " | ".join(head) + " |",
        "|---" * len(head) + "|",
    ]
    for e in evals:
        for condition, summary, score in (
            ("no faults", e.behaviour, e.pass_at_1),
            ("faults", e.behaviour_with_faults, e.pass_at_1_with_faults),
        ):
            if summary is None:
                continue
            cells = [_cell(summary.get(f), pct) for _, f, pct in BEHAVIOUR_COLUMNS]
            lines.append(
                f"| {_name(e)} | {condition} | " + (f"{_pct(score)} | " if faults else "") + " | ".join(cells) + " |"
            )
    kinds = sorted({k for e in evals for k in (_get(e.behaviour_with_faults, "recovery_by_fault") or {})})
    if kinds:
        lines += [
            "",
            "Per fault kind (episodes where it fired): pass rate / recovery rate:",
            "",
            "| policy | " + " | ".join(kinds) + " |",
            "|---" * (len(kinds) + 1) + "|",
        ]
        for e in evals:
            by_kind = _get(e.behaviour_with_faults, "recovery_by_fault") or {}
            lines.append(
                f"| {_name(e)} | "
                + " | ".join(
                    f"{_pct(by_kind[k]['pass_rate'])} / {_pct(by_kind[k].get('recovery_rate'))} "
                    f"({by_kind[k]['episodes']})"
                    if k in by_kind
                    else "–"
                    for k in kinds
                )
                + " |"
            )
    return lines


def _cell(value: Any, pct: bool) -> str:
    if value is None:
        return "–"
    if pct:
        return f"{100 * value:.0f}%"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def _difficulty_lines(steps: list[StepRecord]) -> list[str]:
    """What groups without signal cost over the run, and the tasks dropped as saturated or impossible."""
    if not steps:
        return []
    episodes = sum(r.episodes for r in steps)
    idle = sum(r.no_signal_episodes for r in steps)
    lines = [
        "",
        f"Groups without signal (GRPO skips them) cost {idle} of {episodes} episodes "
        f"({sum(r.no_signal_seconds for r in steps):.0f} episode-seconds).",
    ]
    dropped = {t: (r.step, why) for r in steps for t, why in r.dropped_tasks.items()}
    if dropped:
        lines.append(
            "Dropped (rl.drop_after): "
            + ", ".join(f"{t} ({why}, step {step})" for t, (step, why) in dropped.items())
            + "."
        )
    return lines


def _selection_line(sel: dict[str, Any], rerendered: int) -> str:
    dropped = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sel.get("dropped", {}).items() if v) or "none"
    line = (
        f"Teacher episodes: {sel.get('episodes')}, kept {sel.get('kept')} on {sel.get('tasks_kept')} of "
        f"{sel.get('tasks')} tasks (dropped: {dropped})."
    )
    if rerendered:
        line += f" {rerendered} kept episodes came from a teacher behind an API, re-rendered in the student's template."
    return line


def _name(e: EvalRecord) -> str:
    return e.label or f"after {e.after_steps} step(s)"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"
