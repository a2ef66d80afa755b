"""The curation report: the funnel (candidates → each stage → accepted, counted per lineage: its latest
version), every rejection with its stage and reason, what refining did, and the cost — wall time and tokens
(generator and solver) per accepted task, and dollars when `prices` are given. The paper reports about 16
minutes and $4 per accepted task; this reports ours the same way.

OUT/report.json, OUT/report.md, OUT/rejected.json; a table on the console, and last the line
`accepted N of M candidates`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from openforge.curate.config import CurateConfig
from openforge.curate.ledger import STAGES, Candidate, Ledger, Tokens

FUNNEL = {
    "propose": "proposed",
    "prune": "passed prune",
    "build": "built",
    "test": "grade soundly",
    "difficulty": "difficulty estimated",
    "select": "accepted",
}


class Cost(BaseModel):
    seconds: float
    generator_tokens: Tokens
    solver_tokens: Tokens
    dollars: float | None = None


class CurateReport(BaseModel):
    candidates: int
    accepted: int
    train: int
    heldout: int
    funnel: list[tuple[str, int]]
    rejected: dict[str, dict[str, int]]  # stage → reason → lineages
    sent_back: int  # failures sent back to the generator with their evidence
    refined: int  # lineages the generator rewrote (more than one version)
    fixed_by_refine: int  # of them, accepted
    pass_rates: dict[str, float | None]  # accepted task → estimated pass rate
    total: Cost
    per_accepted: Cost | None
    generator: str
    solver: str | None
    out: str
    tasks_dir: str = ""
    notes: list[str] = Field(default_factory=list)

    @property
    def last_line(self) -> str:
        return f"accepted {self.accepted} of {self.candidates} candidates"


def _dollars(tokens_in: int, tokens_out: int, config: CurateConfig) -> float | None:
    if config.prices is None:
        return None
    return round((tokens_in * config.prices.input + tokens_out * config.prices.output) / 1e6, 4)


def build_report(ledger: Ledger, config: CurateConfig, accepted: list[Candidate]) -> CurateReport:
    final = ledger.final()
    funnel = [(FUNNEL[stage], sum(stage in c.passed for c in final)) for stage in STAGES]
    rejected: dict[str, dict[str, int]] = {}
    for (stage, reason), n in sorted(Counter((c.stage, c.reason) for c in final if c.status == "rejected").items()):
        rejected.setdefault(stage or "?", {})[reason or "?"] = n
    every = list(ledger.candidates.values())
    generator = Tokens(
        input=sum(c.generator_tokens.input for c in every), output=sum(c.generator_tokens.output for c in every)
    )
    solver = Tokens(input=sum(c.solver_tokens.input for c in every), output=sum(c.solver_tokens.output for c in every))
    total = Cost(
        seconds=ledger.elapsed_s,
        generator_tokens=generator,
        solver_tokens=solver,
        dollars=_dollars(generator.input + solver.input, generator.output + solver.output, config),
    )
    per = None
    if accepted:
        n = len(accepted)
        per = Cost(
            seconds=round(total.seconds / n, 1),
            generator_tokens=Tokens(input=generator.input // n, output=generator.output // n),
            solver_tokens=Tokens(input=solver.input // n, output=solver.output // n),
            dollars=None if total.dollars is None else round(total.dollars / n, 4),
        )
    notes = []
    if config.generator.startswith("scripted:"):
        notes.append(
            "scripted generator: it proposes a fixed mix to test the pipeline; it uses no model tokens. "
            "What a real run accepts, and at what cost, depends on the generator model."
        )
    if config.solver is None:
        notes.append("no solver configured: difficulty was not estimated and the band was not applied")
    versions = ledger.lineages()
    return CurateReport(
        candidates=len(final),
        accepted=len(accepted),
        train=sum(c.split == "train" for c in accepted),
        heldout=sum(c.split == "heldout" for c in accepted),
        funnel=funnel,
        rejected=rejected,
        sent_back=sum(c.status == "refined" or c.refine_declined for c in every),
        refined=sum(len(v) > 1 for v in versions.values()),
        fixed_by_refine=sum(len(v) > 1 and v[-1].status == "accepted" for v in versions.values()),
        pass_rates={c.lineage: c.pass_rate for c in accepted},
        total=total,
        per_accepted=per,
        generator=config.generator,
        solver=f"{config.solver.backend} via {config.solver.harness}" if config.solver else None,
        out=str(config.out),
        tasks_dir=str(Path(config.out) / "tasks"),
        notes=notes,
    )


def _cost_line(cost: Cost) -> str:
    g, s = cost.generator_tokens, cost.solver_tokens
    dollars = f"${cost.dollars:.2f}" if cost.dollars is not None else "$ n/a (no prices given)"
    return (
        f"{cost.seconds / 60:.1f} min ({cost.seconds:.0f} s), generator {g.input:,} in / {g.output:,} out tokens, "
        f"solver {s.input:,} in / {s.output:,} out tokens, {dollars}"
    )


def markdown(report: CurateReport, ledger: Ledger) -> str:
    lines = [
        "# Task curation",
        "",
        f"Generator `{report.generator}`; solver {report.solver or 'none'}.",
        "",
        "| stage | candidates |",
        "|---|---|",
    ]
    lines += [f"| {name} | {n} |" for name, n in report.funnel]
    lines += ["", "| rejected at | reason | candidates |", "|---|---|---|"]
    lines += [
        f"| {stage} | {reason} | {n} |" for stage, reasons in report.rejected.items() for reason, n in reasons.items()
    ]
    lines += [
        "",
        f"Refine: {report.sent_back} failure(s) sent back to the generator with their evidence; it rewrote "
        f"{report.refined}, of which {report.fixed_by_refine} were accepted.",
        "",
        f"Accepted {report.accepted} ({report.train} train, {report.heldout} held out) in `{report.tasks_dir}`.",
    ]
    if report.per_accepted is not None:
        lines += ["", f"Per accepted task: {_cost_line(report.per_accepted)}. (The paper: about 16 min and $4.)"]
    lines += ["", f"Total: {_cost_line(report.total)}."]
    lines += [""] + [f"Note: {n}" for n in report.notes]
    lines += ["", "## Rejected", "", "| candidate | stage | reason | evidence |", "|---|---|---|---|"]
    for c in ledger.final():
        if c.status == "rejected":
            evidence = c.detail.strip().splitlines()[0][:160].replace("|", "\\|") if c.detail.strip() else ""
            lines.append(f"| {c.id} | {c.stage} | {c.reason} | {evidence} |")
    return "\n".join(lines) + "\n\n" + report.last_line + "\n"


def write_report(out: Path, report: CurateReport, ledger: Ledger, console: Console) -> None:
    (out / "report.json").write_text(report.model_dump_json(indent=2))
    (out / "report.md").write_text(markdown(report, ledger))
    rejected = [
        {"id": c.id, "lineage": c.lineage, "round": c.round, "stage": c.stage, "reason": c.reason, "detail": c.detail}
        for c in ledger.candidates.values()
        if c.status in ("rejected", "refined")
    ]
    (out / "rejected.json").write_text(json.dumps(rejected, indent=1))
    table = Table(title="curation funnel")
    table.add_column("stage")
    table.add_column("candidates", justify="right")
    table.add_column("rejected here", overflow="fold")
    stage_of = {FUNNEL[s]: s for s in STAGES}
    for name, n in report.funnel:
        reasons = report.rejected.get(stage_of[name], {})
        table.add_row(name, str(n), ", ".join(f"{r} {k}" for r, k in reasons.items()))
    console.print(table)
    if report.per_accepted is not None:
        console.print(f"per accepted task: {_cost_line(report.per_accepted)}")
    for note in report.notes:
        console.print(f"[dim]{note}[/]")
    console.print(
        f"accepted tasks: {report.tasks_dir} ({report.train} train, {report.heldout} held out); "
        f"report: {out / 'report.md'}"
    )
    console.print(report.last_line)
