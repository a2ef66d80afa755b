"""`wandb`: a Weights & Biases run, offline by default (RUN/wandb/offline-run-*; `wandb sync` uploads it
later). `mode: online` and any other `wandb.init` argument go in the logger's options."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class WandbLogger:
    def __init__(self, run: Path, project: str, name: str, config: dict[str, Any], options: dict[str, Any]):
        import wandb

        options = {"mode": "offline", "dir": str(run), **options}
        self.run = wandb.init(project=project, name=name, config=config, **options)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()
