"""What to do with a finished run: `export` it or `analyze` it. `export --format` chooses the room that writes
the format (the store: calls; the viewer: ATIF; veRL's batch: a DataProto). Rooms are imported when a command
runs: the veRL export loads torch."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from openforge.cli.errors import OptionError
from openforge.cli.options import existing_run, one_of

console = Console()


def export(
    run_dir: Path = typer.Argument(..., help="Run directory holding trajectories.db."),
    format: str = typer.Option(
        "jsonl",
        "--format",
        help="jsonl or parquet (one record per call), verl (a DataProto), "
        "or atif (one ATIF trajectory.json per episode, in the directory --out).",
    ),
    out: Path = typer.Option(..., help="File to write (atif: a directory)."),
    mode: str = typer.Option("merged", help="verl only: merged (one sample per continuity segment) or per-call."),
    pad_token_id: int | None = typer.Option(None, help="verl only: default, the pad id of the run's model."),
    model: Path | None = typer.Option(
        None,
        help="atif only: the model directory whose tokenizer decodes replies "
        "(default: the one the run names or holds).",
    ),
) -> None:
    """Export a run: every recorded call (jsonl, parquet), its assembled samples as a veRL DataProto (verl), or
    each episode as an ATIF trajectory (atif; any run layout: every store under RUN_DIR)."""
    one_of("--format", format, ("jsonl", "parquet", "verl", "atif"), "jsonl, parquet, verl or atif")
    if format == "atif":
        from openforge.view.atif import ATIF_VERSION, export_atif

        done = export_atif(run_dir, out, model)
        console.print(
            f"wrote {done.episodes} {ATIF_VERSION} trajectories ({len(done.stores)} store(s)) to [bold]{out}[/]"
        )
    elif format == "verl":
        existing_run(run_dir)
        one_of("--mode", mode, ("merged", "per-call"), "merged or per-call")
        from openforge.train.verl.batch import export_run_dataproto  # torch, and veRL's DataProto

        rows, metrics = export_run_dataproto(run_dir, out, mode=mode, pad_token_id=pad_token_id)
        dropped = sum(metrics["episodes_dropped"].values())
        console.print(
            f"wrote {rows} {mode} samples of {metrics['episodes_used']} episodes ({dropped} dropped) "
            f"to [bold]{out}[/] (DataProto.load_from_disk)"
        )
    else:
        from openforge.store.export import export_calls

        n = export_calls(existing_run(run_dir), out, format="parquet" if format == "parquet" else "jsonl")
        console.print(f"wrote {n} calls to [bold]{out}[/]")


def analyze(
    run_dir: Path = typer.Argument(..., help="A run directory (rollout, eval, train, quickstart, a veRL worker)."),
    reference: Path | None = typer.Option(
        None, help="The oracle's run on the same tasks and harnesses (coverage and efficiency); default: RUN/teacher."
    ),
) -> None:
    """Behaviour metrics from the recorded calls: error recovery, self-verification, tool coverage and mix,
    format robustness, step efficiency; writes RUN/analysis.json, analysis.md and analysis.png."""
    from openforge.analysis import analyze_run, write_analysis

    if not run_dir.is_dir():
        raise OptionError(f"{run_dir} is not a directory")
    if reference is not None and not (reference / "trajectories.db").is_file():
        raise OptionError(f"--reference {reference} holds no trajectories.db: give the oracle's run directory")
    write_analysis(analyze_run(run_dir, reference), run_dir, console)
