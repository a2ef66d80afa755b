"""`OpenForgeAgentLoop`: veRL's agent loop "openforge". Each rollout is a real harness episode.

veRL 0.9.1 builds one loop object per rollout (`hydra.utils.instantiate` of the registry entry, with the
entry's extra keys as constructor arguments) and awaits `run(sampling_params, **row)`, where `row` holds the
dataset row's fields (`extra_info`, `raw_prompt`, ...) and, with the v1 trainer, `uid`, `session_id` (which of
the n samples) and `global_steps`. `run()`:

1. finds the row's task (`extra_info.task_id` / `task_path`) and harness (`extra_info.harness`);
2. runs the episode through the worker's proxy (`runtime.py`: started once per worker, reused), the harness's
   model calls sampled by veRL's server client (`VerlServerBackend`), the task's verifier grading it;
3. assembles the recorded calls (`openforge.train.assemble`, `merged` or `per-call`) and returns them as a
   **list** of `AgentLoopOutput`s, each with the episode's reward as `reward_score`.

The list is what veRL 0.9.1's v1 trainer takes (`trainer.use_v1: true`, the default; `AgentLoopWorkerTQ`
stores each output under `{uid}_{session}_{i}`, and GRPO broadcasts each session's advantage to all its
outputs). The outcome classes are the orchestrator's own (`openforge.rollout.outcome`, the same episode code
runs them): an agent that ran past its timeout or made its harness exit is `failed` with reward 0 and trained
on like any failure (counted under `failed/agent` too), so hanging or crashing cannot hide a bad reward; an
episode that ended in an infrastructure failure (sandbox, proxy, a harness that never reached the model,
verifier) is dropped whole: `run()` returns `[]`, which v1 skips ("Empty output"), and the GRPO group is
computed over the sessions that did return. Drops are counted in the worker's counters, which every output
carries in `extra_fields["openforge"]["worker"]`, and logged. The legacy trainer (`use_v1: false`) takes
exactly one output per rollout and cannot drop one, so the loop refuses to run under it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from openforge.rollout.outcome import agent_caused
from openforge.train.assemble import assemble_episode
from openforge.train.verl import AGENT_NAME
from openforge.train.verl.config import VerlLoopConfig
from openforge.train.verl.outputs import Limits, samples_to_outputs
from openforge.train.verl.runtime import EpisodeRun, WorkerRuntime, worker_runtime

log = logging.getLogger(__name__)


def _plain(value: Any) -> Any:
    """OmegaConf containers (what hydra passes) → plain dicts and lists."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover - veRL depends on omegaconf
        return value
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _row_field(row: Mapping[str, Any], key: str) -> Any:
    """A dataset row's field as a plain value (veRL's batches hold numpy scalars)."""
    value: Any = row.get(key)  # whatever veRL's batch holds: an int, a str, a numpy scalar, None
    return value.item() if hasattr(value, "item") else value


@register(AGENT_NAME)
class OpenForgeAgentLoop(AgentLoopBase):
    # veRL's constructor arguments (config, server manager, tokenizer, ...) pass through to its own class
    def __init__(self, *args: Any, openforge: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.config.trainer.get("use_v1", True):
            raise ValueError(
                "the openforge agent loop needs veRL's v1 trainer (trainer.use_v1=true, the 0.9.1 "
                "default): the legacy trainer takes exactly one output per rollout, so it can "
                "neither train a multi-segment episode nor drop an infrastructure failure"
            )
        self.settings = VerlLoopConfig.model_validate(_plain(openforge) or {})
        model = self.settings.model or Path(self.config.actor_rollout_ref.model.path)
        if not Path(model).is_dir():
            raise ValueError(
                f"the proxy needs the model as a local directory (chat template, tokenizer); "
                f"{str(model)!r} is not one: set `openforge.model` in agent_loop.yaml"
            )
        self.model_dir = Path(model)
        rollout = self.rollout_config
        self.limits = Limits(int(rollout.prompt_length), int(rollout.response_length))
        self.max_context = int(rollout.get("max_model_len") or self.limits.prompt_length + self.limits.response_length)

    # veRL 0.9.1's base class declares one output; its v1 trainer takes a list (the module docstring)
    async def run(self, sampling_params: dict[str, Any], **row: Any) -> list[AgentLoopOutput]:  # type: ignore[override, unused-ignore]
        runtime = await worker_runtime(self.settings, self.model_dir, self.max_context)
        info = _plain(row.get("extra_info")) or {}
        harness = info.get("harness")
        if not harness or "task_id" not in info:
            raise ValueError(
                "dataset row lacks extra_info.task_id / extra_info.harness: build the dataset with "
                "`openforge verl dataset`"
            )
        task = runtime.task(info["task_id"], info.get("task_path"))
        step = _row_field(row, "global_steps")
        session = _row_field(row, "session_id")
        metadata = {
            "step": step if step is not None else 0,
            "verl_uid": _row_field(row, "uid"),
            "verl_session": session,
        }
        t0 = time.monotonic()
        done = await runtime.run_episode(
            task, harness, int(session or 0), self.server_manager, sampling_params, metadata
        )
        return self._outputs(runtime, done, metadata["step"], time.monotonic() - t0)

    def _outputs(self, runtime: WorkerRuntime, done: EpisodeRun, step: int, elapsed_s: float) -> list[AgentLoopOutput]:
        counters = runtime.counters
        counters["episodes"] += 1
        outcome = done.result.outcome
        if outcome.is_infrastructure_failure:
            counters[f"dropped/{outcome.value}"] += 1
            log.warning(
                "openforge: dropped episode %s (%s: %s); worker counters %s",
                done.episode.id,
                outcome.value,
                done.result.reason,
                dict(counters),
            )
            return []
        if done.result.reward == 0.0 and agent_caused(done.result.reason):
            counters["failed/agent"] += 1
        samples = assemble_episode(
            done.episode,
            done.calls,
            mode=self.settings.mode,
            include_side_calls=self.settings.include_side_calls,
            step=step,
        )
        converted = samples_to_outputs(
            samples, self.limits, self._metrics(done, elapsed_s), self._extra(done, counters)
        )
        counters["samples"] += len(converted.outputs)
        counters["samples_over_prompt_length"] += converted.over_prompt_length
        counters["responses_cut"] += converted.responses_cut
        if not converted.outputs:
            counters["dropped/no_samples"] += 1
            log.warning(
                "openforge: episode %s gave no sample that fits (prompt_length %d)",
                done.episode.id,
                self.limits.prompt_length,
            )
        return converted.outputs

    @staticmethod
    def _metrics(done: EpisodeRun, elapsed_s: float) -> dict[str, float]:
        """veRL's per-rollout timings: model time, the rest of the harness's time (tools), grading."""
        generating = sum((c.finished_at or c.started_at) - c.started_at for c in done.calls)
        timings = done.result.timings
        acting = timings.get("agent_s", elapsed_s)
        return {
            "generate_sequences": generating,
            "tool_calls": max(0.0, acting - generating),
            "compute_score": timings.get("verify_s", 0.0),
        }

    def _extra(self, done: EpisodeRun, counters: Counter) -> dict[str, Any]:
        episode = done.episode
        return {
            # v1 copies the last output's reward_extra_info onto the others: every output needs one
            "reward_extra_info": {"passed": float(done.result.outcome.value == "passed")},
            "openforge": {
                "episode_id": episode.id,
                "task": episode.task,
                "harness": episode.harness,
                "outcome": done.result.outcome.value,
                "attempts": done.attempts,
                "mode": self.settings.mode,
                "worker": dict(counters),
            },
        }
