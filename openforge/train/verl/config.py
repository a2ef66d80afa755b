"""What the openforge agent loop needs besides veRL's own config: where episodes run and how they are graded
and assembled. Given as the extra keys of the loop's entry in `agent_loop.yaml` (veRL passes them to the
loop's constructor), e.g.

    - name: openforge
      _target_: openforge.train.verl.agent_loop.OpenForgeAgentLoop
      openforge:
        run_dir: /data/openforge-runs/grpo-qwen3
        sandbox: docker
        tasks: [/data/tasks]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class VerlLoopConfig(BaseModel):
    """- `run_dir`: where each worker keeps its trajectory store (`RUN_DIR/worker-<host>-<pid>`).
    - `model`: the model directory the proxy renders prompts with (chat template, tokenizer); default veRL's
      `actor_rollout_ref.model.path` (it must be a local directory).
    - `sandbox`: sandbox provider (`docker`, `local`, `kubernetes`); `sandbox_options` go to
      its constructor.
    - `tasks`: task roots on the worker; a row's task is found there by id. Default: the row's `task_path`.
    - `mode`: how an episode becomes samples (#5's assembler): `merged` (one per continuity segment) or
      `per-call`; `include_side_calls` trains the harness's side calls too.
    - `max_attempts`: tries per rollout; only infrastructure failures are retried, and a rollout whose last
      try failed so is dropped (no output).
    - `agent_timeout_s`, `harness_options`, `harness_bundle`, `image_map`, `max_new_tokens`: as for
      `openforge rollout`.
    """

    model_config = ConfigDict(extra="forbid")

    run_dir: Path = Path("runs/verl")
    model: Path | None = None
    sandbox: str = "docker"
    sandbox_options: dict[str, Any] = Field(default_factory=dict)
    tasks: list[Path] | None = None
    mode: Literal["merged", "per-call"] = "merged"
    include_side_calls: bool = False
    max_attempts: int = Field(default=1, ge=1)
    agent_timeout_s: float | None = Field(default=None, gt=0)
    harness_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    harness_bundle: Path | None = None
    image_map: dict[str, str] = Field(default_factory=dict)
    max_new_tokens: int = Field(default=4096, ge=1)
