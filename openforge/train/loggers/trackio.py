"""`trackio`: a trackio run in the project named by `project`, in trackio's local store (`TRACKIO_DIR`,
default ~/.cache/huggingface/trackio; `trackio show` opens its dashboard). Options go to `trackio.init`."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TrackioLogger:
    def __init__(self, run: Path, project: str, name: str, config: dict[str, Any], options: dict[str, Any]):
        import trackio

        self.trackio = trackio
        self.run = trackio.init(project=project, name=name, config=config, **options)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()
