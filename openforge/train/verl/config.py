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
from typing import Literal

from openforge.rollout.settings import EpisodeSettings


class VerlLoopConfig(EpisodeSettings):
    """The `EpisodeSettings` (harness options and bundle, sandbox, image map, agent user and timeout, token cap,
    attempts, proxy: as for `openforge rollout`) and:

    - `run_dir`: where each worker keeps its trajectory store (`RUN_DIR/worker-<host>-<pid>`).
    - `model`: the model directory the proxy renders prompts with (chat template, tokenizer); default veRL's
      `actor_rollout_ref.model.path` (it must be a local directory).
    - `tasks`: task roots on the worker; a row's task is found there by id. Default: the row's `task_path`.
    - `mode`: how an episode becomes samples (#5's assembler): `merged` (one per continuity segment) or
      `per-call`; `include_side_calls` trains the harness's side calls too.

    The harness of each rollout is its dataset row's, sampled with veRL's sampling parameters. A rollout whose
    last try (`max_attempts`) ended in an infrastructure failure is dropped (no output).
    """

    run_dir: Path = Path("runs/verl")
    model: Path | None = None
    tasks: list[Path] | None = None
    mode: Literal["merged", "per-call"] = "merged"
    include_side_calls: bool = False
