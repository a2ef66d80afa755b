"""`openforge verl`: veRL integration. The dataset writer is imported when the command runs (it needs pyarrow,
from the `report` extra)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from openforge.cli.options import one_of

console = Console()
verl_app = typer.Typer(help="veRL integration: datasets for veRL's trainer.", no_args_is_help=True)


@verl_app.command("dataset")
def verl_dataset(
    tasks: list[Path] = typer.Option(..., "--tasks", help="Task directories or roots holding them (repeatable)."),
    harness: str = typer.Option("react", help="Harness name(s), comma-separated: one row per task per harness."),
    out: Path = typer.Option(..., help="Parquet file to write."),
    split: str | None = typer.Option(None, help="Keep one split only: train or heldout."),
) -> None:
    """Write veRL's training parquet: one row per (task, harness), agent loop `openforge`."""
    from openforge.train.verl.dataset import write_dataset

    one_of("--split", split, (None, "train", "heldout"), "train or heldout")
    harnesses = [h.strip() for h in harness.split(",") if h.strip()]
    rows = write_dataset(tasks, harnesses, out, split=split)
    console.print(f"wrote {rows} rows ({len(harnesses)} harness(es)) to [bold]{out}[/]")
