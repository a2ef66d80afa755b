"""One small interface for metric loggers, and the metrics a training run sends to them.

A logger gets flat `{name: number}` dicts with a step, and is closed at the end. The run sends, in order:
- every GRPO step's record (the numbers of RUN/steps.jsonl) as `train/<field>`, at the step's number;
- every held-out evaluation as `eval/pass_at_1` and `eval/graded`, at the number of RL steps the policy had
  had (the quickstart's policies, evaluated after training, as `eval/<label>/...` at the last step);
- the behaviour metrics a report carries (`openforge.analysis` summaries, under its `behaviour` key) as
  `behaviour/<path>`, at the last step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from openforge.train.records import EvalRecord, StepRecord


class MetricLogger(Protocol):
    def log(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


def step_metrics(record: StepRecord) -> dict[str, float]:
    """The step record's numbers (booleans as 0/1), as steps.jsonl holds them."""
    out: dict[str, float] = {}
    for name, value in record.model_dump().items():
        if name != "step" and isinstance(value, (int, float)):
            out[f"train/{name}"] = float(value)
    for harness, n in record.harnesses.items():
        out[f"train/harness_episodes/{harness}"] = float(n)
    return out


def eval_metrics(record: EvalRecord) -> dict[str, float]:
    prefix = f"eval/{record.label}" if record.label else "eval"
    out = {f"{prefix}/graded": float(record.graded)}
    if record.pass_at_1 is not None:
        out[f"{prefix}/pass_at_1"] = float(record.pass_at_1)
    if record.pass_at_1_with_faults is not None:  # `faults.eval`: the same instances with a fault put in
        out[f"{prefix}/pass_at_1_with_faults"] = float(record.pass_at_1_with_faults)
    return out


def behaviour_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """Numeric leaves of the report's `behaviour` section, flattened (`behaviour/<key>/<key>...`)."""
    out: dict[str, float] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, bool) or isinstance(value, (int, float)):
            out[path] = float(value)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{path}/{k}")

    walk(report.get("behaviour") or {}, "behaviour")
    return {} if list(out) == ["behaviour"] else out


class MetricLoggers:
    """The run's loggers: each record goes to all of them."""

    def __init__(self, loggers: list[MetricLogger]):
        self.loggers = loggers
        self.last_step = 0

    def log(self, metrics: dict[str, float], step: int) -> None:
        if not metrics:
            return
        self.last_step = max(self.last_step, step)
        for logger in self.loggers:
            logger.log(metrics, step)

    def log_step(self, record: StepRecord) -> None:
        self.log(step_metrics(record), record.step)

    def log_eval(self, record: EvalRecord) -> None:
        # the quickstart's policies are evaluated after training, out of step order: logged at the last step
        # (steps only go forward in some loggers, e.g. wandb)
        step = max(self.last_step, record.after_steps) if record.label else record.after_steps
        self.log(eval_metrics(record), step)

    def log_report(self, report: Mapping[str, Any]) -> None:
        self.log(behaviour_metrics(report), self.last_step)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()
