"""What every stage of a training run shares: its config, directory, model, data, console and timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from openforge.core.json_types import JSONObject
from openforge.train.config import TrainConfig
from openforge.train.data import Data
from openforge.train.loggers import MetricLoggers


@dataclass
class RunContext:
    config: TrainConfig
    run: Path
    model_path: Path  # the base model (a model directory)
    console: Console
    data: Data
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase
    sft: dict[str, Any] | None = None  # the SFT stage's summary (also in its checkpoint)
    loggers: MetricLoggers = field(default_factory=lambda: MetricLoggers([]))  # `loggers:` of the config
    validation: JSONObject | None = None  # what the tasks' check against the reward hacks found (`validation.py`)
    grpo_cpu: dict[str, float] | None = None  # the GRPO stage's CPU use in this process (`rl_stage.CpuMeter`)
    _sandbox: str | None = None

    @property
    def sandbox(self) -> str:
        """The sandbox backend (`auto` resolved on first use: it may start Docker)."""
        if self._sandbox is None:
            from openforge.rollout.sandbox_choice import choose_sandbox

            self._sandbox = choose_sandbox(self.config.sandbox, self.console)
        return self._sandbox

    @property
    def sandbox_used(self) -> str | None:
        """The sandbox backend if one was needed, else None (nothing resolved)."""
        return self._sandbox
