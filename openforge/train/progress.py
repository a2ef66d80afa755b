"""What a run shows while it works: a ruled, timed heading per phase, and progress bars."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class Phase:
    """Times one phase of the pipeline (into `timings`, seconds) and announces it."""

    def __init__(self, name: str, console: Console, timings: dict[str, float]):
        self.name, self.console, self.timings = name, console, timings

    def __enter__(self) -> Phase:
        self.started = time.monotonic()
        self.console.rule(f"[bold]{self.name}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.timings[self.name] = round(time.monotonic() - self.started, 1)


def progress_bar(console: Console) -> Progress:
    """A live display for the pipeline's bars; each bar carries an `info` field (loss, reward, ...)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
    )
