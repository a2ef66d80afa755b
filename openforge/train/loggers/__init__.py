"""Metric loggers of a training run (`loggers:` in the train / quickstart config): `jsonl` (RUN/metrics.jsonl)
always, and `tensorboard`, `wandb` (offline by default), `mlflow` (a file store by default) and `trackio`, each
from its own extra. See `base.py` for what is logged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openforge.core.errors import ConfigurationError
from openforge.train.loggers.base import MetricLogger, MetricLoggers, behaviour_metrics, eval_metrics, step_metrics
from openforge.train.loggers.jsonl import METRICS_FILE, JsonlLogger

LOGGER_KINDS = ("tensorboard", "wandb", "mlflow", "trackio")
# The distribution each logger imports (`pip install 'openforge-rl[<kind>]'` installs it).
_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow", "trackio": "trackio"}


class LoggerUnavailable(ConfigurationError, RuntimeError):
    """A configured logger's package is not installed; the message names the extra to install."""


def open_loggers(settings: list[Any], run: Path, config: dict[str, Any]) -> MetricLoggers:
    """The jsonl logger and one logger per entry of `settings` (`LoggerSettings`: kind, project, name,
    options). LoggerUnavailable when a logger's package is missing."""
    loggers: list[MetricLogger] = [JsonlLogger(run)]
    try:
        for s in settings:
            loggers.append(_open(s, run, config))
    except BaseException:
        for logger in loggers:
            logger.close()
        raise
    return MetricLoggers(loggers)


def _open(s: Any, run: Path, config: dict[str, Any]) -> MetricLogger:
    name, options = s.name or run.name, dict(s.options)
    try:
        if s.kind == "tensorboard":
            from openforge.train.loggers.tensorboard import TensorBoardLogger

            return TensorBoardLogger(run, options)
        if s.kind == "wandb":
            from openforge.train.loggers.wandb import WandbLogger

            return WandbLogger(run, s.project, name, config, options)
        if s.kind == "mlflow":
            from openforge.train.loggers.mlflow import MLflowLogger

            return MLflowLogger(run, s.project, name, config, options)
        if s.kind == "trackio":
            from openforge.train.loggers.trackio import TrackioLogger

            return TrackioLogger(run, s.project, name, config, options)
    except ImportError as e:
        raise LoggerUnavailable(
            f"logger {s.kind!r} needs {_PACKAGES[s.kind]} ({e}): pip install 'openforge-rl[{s.kind}]'"
        ) from None
    raise ValueError(f"unknown logger {s.kind!r}; known: jsonl (always on), {', '.join(LOGGER_KINDS)}")


__all__ = [
    "LOGGER_KINDS",
    "METRICS_FILE",
    "LoggerUnavailable",
    "MetricLogger",
    "MetricLoggers",
    "behaviour_metrics",
    "eval_metrics",
    "open_loggers",
    "step_metrics",
]
