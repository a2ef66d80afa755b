"""The run's records, one JSON line each: RUN/steps.jsonl (a GRPO step) and RUN/evals.jsonl (a held-out
evaluation). One definition of every field; the report and `--resume` read them back."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from openforge.core.json_types import JSONObject

STEPS_FILE = "steps.jsonl"
EVALS_FILE = "evals.jsonl"


class StepRecord(BaseModel):
    """One GRPO step: its episodes, its update, the weights it pushed."""

    model_config = ConfigDict(extra="forbid")

    step: int
    reward: float  # mean reward of the step's graded episodes
    pass_rate: float  # share of the graded episodes that passed
    episodes: int
    infrastructure_failures: int  # episodes not graded (left out of training and of `reward`)
    harnesses: dict[str, int]  # episodes per harness
    groups: int  # GRPO groups: (step, task, harness)
    groups_with_signal: int  # groups whose rewards differ (the others carry no signal and are skipped)
    updated: bool  # False when no group had signal: no optimizer step
    loss: float
    clip_fraction: float = 0.0
    # Tokens: `tokens` counts every token the policy sampled in the step's samples (merged samples, loss mask
    # 1), trained or not; `trained_tokens` counts those of them in groups with signal — what the update used.
    tokens: int
    trained_tokens: int
    merge_rate: float  # calls merged into the sample of the call before (continuity held)
    policy_version: int  # the version the step's update produced (pushed into the proxy)
    seconds: float  # this step's wall time
    train_s: float = 0.0  # of it, the update, its checkpoint and the weight push (the rest: the episodes)
    elapsed_s: float  # since the GRPO stage started (over restarts: what the `rl.seconds` budget counts)
    tasks: list[str]  # task ids trained on
    # Difficulty (`difficulty.py`): each task's (passed, graded) episodes this step; the tasks this step dropped
    # from the pool (`rl.drop_after`: saturated / impossible); the train tasks left to draw from (None: not tracked).
    task_results: dict[str, tuple[int, int]] = {}
    dropped_tasks: dict[str, str] = {}
    active_tasks: int | None = None
    # What the groups without signal (all rewards equal; GRPO skips them) cost: groups, episodes, episode-seconds.
    no_signal_groups: int = 0
    no_signal_episodes: int = 0
    no_signal_seconds: float = 0.0
    lora: bool = False  # the update trained a LoRA adapter (`lora:`), not every weight
    # Off-policy (`rl.max_staleness`; `grpo.GRPOMetrics`): groups trained by staleness (policy versions between
    # the oldest call of the group and the policy updated, {"0": n, ...}), groups dropped as staler than the bound,
    # π_prox / π_behav over the trained tokens (mean, max, share above `rl.importance_cap`).
    staleness: dict[str, int] = {}
    stale_groups_dropped: int = 0
    behaviour_ratio_mean: float = 0.0
    behaviour_ratio_max: float = 0.0
    behaviour_ratio_truncated: float = 0.0
    episode_seconds_mean: float = 0.0  # the step's episodes' mean wall time (long episodes are not starved)


class EvalRecord(BaseModel):
    """One greedy held-out pass@1 measurement of one policy."""

    model_config = ConfigDict(extra="forbid")

    after_steps: int  # RL steps the evaluated policy had had
    pass_at_1: float | None  # None: no episode could be graded
    graded: int  # episodes graded (infrastructure failures are left out, never counted as 0)
    policy: str  # the checkpoint evaluated
    label: str | None = None  # `evaluation: policies`: base | sft | rl | sft_more
    # the episodes' behaviour (`openforge.analysis.BehaviourSummary`, overall): error recovery, self-checks, ...
    behaviour: dict[str, Any] | None = None
    # pass@1 in each evaluated harness (`eval_harnesses`; None: nothing graded there)
    pass_at_1_by_harness: dict[str, float | None] = Field(default_factory=dict)
    # with `faults.eval`: the same held-out set with faults injected; pass@1 over the episodes that had a fault
    # put in (armed and applicable), and their behaviour (`recovery_by_fault` per kind)
    pass_at_1_with_faults: float | None = None
    graded_with_faults: int = 0
    behaviour_with_faults: dict[str, Any] | None = None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, records: Sequence[BaseModel]) -> None:
    if path.is_file() or records:
        path.write_text("".join(r.model_dump_json() + "\n" for r in records))


def append_jsonl(path: Path, record: BaseModel) -> None:
    with path.open("a") as f:
        f.write(record.model_dump_json() + "\n")


def read_steps(run: Path) -> list[StepRecord]:
    return [StepRecord.model_validate(r) for r in read_jsonl(run / STEPS_FILE)]


def read_evals(run: Path) -> list[EvalRecord]:
    return [EvalRecord.model_validate(r) for r in read_jsonl(run / EVALS_FILE)]


# RUN/report.json's GRPO steps, in both evaluations: their number and their records (`StepRecord` dumps).
GRPO_STEPS = "grpo_steps"
GRPO_STEP_RECORDS = "grpo_step_records"


def report_step_records(report: Mapping[str, object]) -> list[JSONObject]:
    """The GRPO step records of a report.json, also of a report written before they had their own name (then
    `rl_steps` with `evaluation: policies`, `steps` with `evaluation: curve`); [] where there are none."""
    for key in (GRPO_STEP_RECORDS, "rl_steps", "steps"):
        records = report.get(key)
        if isinstance(records, list):
            return [r for r in records if isinstance(r, dict)]
    return []
