"""Writing a run's behaviour analysis: `analysis.json` (everything), `analysis.md` (tables) and
`analysis.png` (rates and tool mix per store and harness), plus a table on the console."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from openforge.analysis.metrics import BehaviourSummary
from openforge.analysis.run import RunAnalysis

# (column, summary field, kind): the table shown for every group of episodes
COLUMNS: list[tuple[str, str, str]] = [
    ("episodes", "graded", "int"),
    ("pass", "pass_rate", "pct"),
    ("met error", "met_error", "int"),
    ("recovery", "recovery_rate", "pct"),
    ("self-verify", "self_verification_rate", "pct"),
    ("coverage", "coverage", "pct"),
    ("shell share", "shell_share", "pct"),
    ("parse errors", "parse_error_calls", "int"),
    ("calls", "mean_calls", "num"),
    ("tokens", "mean_sampled_tokens", "num"),
    ("calls/ref", "calls_vs_reference", "num"),
    ("breaks", "mean_breaks", "num"),
]


def cell(summary: BehaviourSummary, field: str, kind: str) -> str:
    value = getattr(summary, field)
    if value is None:
        return "–"
    if kind == "pct":
        return f"{100 * value:.0f}%"
    if kind == "num":
        return f"{value:.1f}"
    return str(value)


def rows(analysis: RunAnalysis) -> list[tuple[str, BehaviourSummary]]:
    """(label, summary) per store overall and per harness within it."""
    out = []
    for s in analysis.stores:
        out.append((s.store, s.overall))
        if len(s.per_harness) > 1:
            out += [(f"{s.store} · {h}", summ) for h, summ in s.per_harness.items()]
    return out


def markdown(analysis: RunAnalysis) -> str:
    lines = [
        "# Behaviour analysis",
        "",
        f"Run `{analysis.run}`"
        + (
            f", reference `{analysis.reference}`"
            if analysis.reference
            else ", no reference (coverage and efficiency need the oracle's episodes: `--reference`)"
        )
        + ".",
        "",
        "| store | " + " | ".join(c for c, _, _ in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    for label, summary in rows(analysis):
        lines.append(f"| {label} | " + " | ".join(cell(summary, f, k) for _, f, k in COLUMNS) + " |")
    faults = [(s.store, k, v) for s in analysis.stores for k, v in s.overall.recovery_by_fault.items()]
    if faults:
        lines += [
            "",
            "Faults injected:",
            "",
            "| store | fault | episodes | passed | met error |",
            "|---|---|---|---|---|",
        ]
        lines += [f"| {st} | {k} | {v['episodes']} | {v['passed']} | {v['met_error']} |" for st, k, v in faults]
    lines += ["", "![behaviour](analysis.png)", ""]
    return "\n".join(lines)


def console_table(analysis: RunAnalysis) -> Table:
    table = Table(title="behaviour")
    table.add_column("store")
    for c, _, _ in COLUMNS:
        table.add_column(c, justify="right")
    for label, summary in rows(analysis):
        table.add_row(label, *[cell(summary, f, k) for _, f, k in COLUMNS])
    return table


def plot(path: Path, analysis: RunAnalysis) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = rows(analysis)
    labels = [g for g, _ in groups]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.5 * len(groups) + 3))
    rates = [
        ("pass", "pass_rate"),
        ("recovery", "recovery_rate"),
        ("self-verify", "self_verification_rate"),
        ("coverage", "coverage"),
    ]
    height = 0.8 / len(rates)
    for i, (name, field) in enumerate(rates):
        values = [100 * (getattr(s, field) or 0) for _, s in groups]
        left.barh([y + i * height for y in range(len(groups))], values, height=height, label=name)
    left.set_yticks([y + 0.4 - height / 2 for y in range(len(groups))], labels, fontsize=8)
    left.invert_yaxis()
    left.set_xlim(0, 100)
    left.set_xlabel("% of graded episodes (recovery: of those that met an error)")
    left.legend(fontsize=8)
    kinds = sorted({k for _, s in groups for k in s.tool_mix})
    base = [0.0] * len(groups)
    for kind in kinds:
        shares = [100 * s.tool_mix.get(kind, 0) for _, s in groups]
        right.barh(range(len(groups)), shares, left=base, label=kind)
        base = [b + v for b, v in zip(base, shares)]
    right.set_yticks(range(len(groups)), labels, fontsize=8)
    right.invert_yaxis()
    right.set_xlabel("tool mix (% of tool steps)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_analysis(analysis: RunAnalysis, out_dir: Path, console: Console | None = None) -> list[Path]:
    out_dir = Path(out_dir)
    paths = [out_dir / "analysis.json", out_dir / "analysis.md", out_dir / "analysis.png"]
    paths[0].write_text(json.dumps(analysis.model_dump(mode="json"), indent=1))
    paths[1].write_text(markdown(analysis))
    plot(paths[2], analysis)
    if console is not None:
        console.print(console_table(analysis))
        console.print("analysis: " + ", ".join(str(p) for p in paths))
    return paths


__all__ = ["console_table", "markdown", "plot", "write_analysis"]
