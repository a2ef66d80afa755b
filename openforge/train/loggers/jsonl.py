"""`jsonl` (always on): RUN/metrics.jsonl, one line per logged dict: `{"step": N, "metrics": {...}}` — what
every other logger was sent."""

from __future__ import annotations

import json
from pathlib import Path

METRICS_FILE = "metrics.jsonl"


class JsonlLogger:
    def __init__(self, run: Path):
        self.path = run / METRICS_FILE
        self._file = self.path.open("a")

    def log(self, metrics: dict[str, float], step: int) -> None:
        self._file.write(json.dumps({"step": step, "metrics": metrics}) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
