"""What a rollout run is: tasks × harnesses × samples, with which model, where and how (`EpisodeSettings`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from openforge.faults import FaultSpec, parse_fault_spec
from openforge.rollout.settings import EpisodeSettings, HarnessNames, ServingSettings, TaskValidationSettings


class RolloutConfig(EpisodeSettings, ServingSettings, TaskValidationSettings):
    """`openforge rollout` / `openforge eval` options (also usable from YAML): the `EpisodeSettings` (where and
    how each episode runs: harness options, sandbox, image map, token cap, attempts, proxy, ...) and the batch:

    - `tasks`: task directories or roots holding them (Harbor layout); `split` keeps one split only, `task_ids`
      the named tasks only.
    - `harnesses`: harness names (`react`, `claude-code`, `codex`, `openclaw`); several are mixed in one run.
    - `samples`: episodes per (task, harness); `concurrency`: episodes at once.
    - `model`, `backend`: what the run's proxy serves; `run`: the run directory; `resume`: skip finished slots.
    - `temperature`, `top_p`: sample every call at this temperature / nucleus mass (None: as each request asks);
      what a call was sampled with is recorded on it (`sampling`).
    - `faults`: faults injected into the episodes' environments (`openforge.faults.spec`: a spec like
      `transient:0.3,missing_dir:0.2` or its mapping); recorded on each episode.
    - `step`: the training step the episodes belong to (GRPO groups are (step, task, harness)).
    - `validate_tasks` (off here), `drop_hackable_tasks`: the tasks checked against the reward-hack suite first
      (`TaskValidationSettings`).
    """

    tasks: list[Path] = Field(min_length=1)
    harnesses: HarnessNames = Field(default_factory=lambda: ["react"])
    samples: int = Field(default=1, ge=1)
    concurrency: int = Field(default=4, ge=1)
    model: Path
    run: Path
    split: Literal["train", "heldout"] | None = None
    task_ids: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    resume: bool = False
    step: int = 0
    faults: FaultSpec | None = None

    @field_validator("faults", mode="before")
    @classmethod
    def _fault_spec(cls, v: Any) -> Any:
        return parse_fault_spec(v)
