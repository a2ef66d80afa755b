"""`tensorboard`: event files in RUN/tensorboard (`tensorboard --logdir RUN/tensorboard`), written with
PyTorch's SummaryWriter (the `tensorboard` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TensorBoardLogger:
    def __init__(self, run: Path, options: dict[str, Any]):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(options.pop("dir", run / "tensorboard")), **options)

    def log(self, metrics: dict[str, float], step: int) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
