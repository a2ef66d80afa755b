"""Helpers for the veRL integration tests: a CPU stand-in for veRL's server client, veRL's trainer config, and
veRL's own v1 post-processing run on CPU. No tests here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import unavailable

VERL_CONFIG = "verl/trainer/config/_generated_ppo_trainer.yaml"
SOLVE = (
    "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": "touch /app/done.txt"}}) + "\n</tool_call>"
)
IDLE = "I will not do anything."


def require_verl():
    try:
        import hydra  # noqa: F401
        import verl.experimental.agent_loop
        import verl.trainer.ppo.v1  # noqa: F401
    except ImportError as e:
        unavailable(f"veRL's agent loop is not importable ({e}): run scripts/prepare-test-env.sh")


def fake_logprob(token_id: int) -> float:
    """Distinct, token-dependent values, so a mis-aligned logprob shows."""
    return -0.05 - 0.01 * (token_id % 50)


class CpuServerClientStandIn:
    """Stands in for veRL's `LLMServerClient` (same `generate` signature, checked in the tests): each request id
    (one episode) gets the next script of `scripts` at its first call, its turns encoded as the scripted
    backend encodes them; logprobs are `fake_logprob`, weights version `global_steps`.

    A plain class on purpose: hydra (which builds the loop) turns a dataclass argument into a config node."""

    def __init__(self, model_dir: Path, scripts: list[list[str]], global_steps: int = 7):
        self.model_dir, self.scripts, self.global_steps = model_dir, scripts, global_steps
        self.requests: list[dict] = []
        self._assigned: dict[str, list[str]] = {}
        self._turn: dict[str, int] = {}

    async def generate(
        self,
        request_id,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        audio_data: list[Any] | None = None,
        mm_processor_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        from verl.workers.rollout.replica import TokenOutput

        from openforge.inference.scripted import encode_completion, end_of_turn_id
        from openforge.models import ModelDir

        model = ModelDir(self.model_dir)
        self.requests.append({"request_id": request_id, "prompt_ids": list(prompt_ids), **sampling_params})
        script = self._assigned.setdefault(request_id, self.scripts[len(self._assigned) % len(self.scripts)])
        turn = self._turn.get(request_id, 0)
        self._turn[request_id] = turn + 1
        ids = encode_completion(model.tokenizer, script[min(turn, len(script) - 1)]) + [end_of_turn_id(model)]
        ids = ids[: sampling_params["max_tokens"]]
        return TokenOutput(
            token_ids=ids,
            log_probs=[fake_logprob(t) for t in ids],
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )


def trainer_config(model_dir: Path, prompt_length: int = 4096, response_length: int = 4096):
    """veRL's full default PPO config (its generated YAML), pointed at the tiny model."""
    import verl
    from omegaconf import OmegaConf

    config = OmegaConf.load(Path(verl.__file__).parent.parent / VERL_CONFIG)
    config.data.max_prompt_length = prompt_length
    config.data.max_response_length = response_length
    config.actor_rollout_ref.rollout.prompt_length = prompt_length
    config.actor_rollout_ref.rollout.response_length = response_length
    config.actor_rollout_ref.model.path = str(model_dir)
    return config


def instantiate_loop(config, client, tokenizer, agent_loop_yaml: Path):
    """The loop as veRL's AgentLoopWorker builds it: the YAML entry into veRL's registry, then
    `hydra.utils.instantiate` with the worker's arguments (agent_loop.py, `_run_agent_loop`)."""
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import (
        DictConfigWrap,
        ToolListWrap,
        _agent_loop_registry,
    )
    from verl.utils.dataset.rl_dataset import RLHFDataset

    for entry in OmegaConf.load(agent_loop_yaml):
        _agent_loop_registry[entry.name] = entry
    return hydra.utils.instantiate(
        config=_agent_loop_registry["openforge"],
        trainer_config=DictConfigWrap(config=config),
        server_manager=client,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


class CapturingTransferQueue:
    """Takes what veRL's v1 worker puts into TransferQueue (the real one needs its Ray-backed servers)."""

    def __init__(self):
        self.keys: list[str] = []
        self.fields: list[dict] = []  # one dict per output (the worker's per-put batching is deferred)

    async def async_kv_batch_put(self, keys, fields, tags, partition_id):
        self.keys.extend(keys)
        self.fields.extend(fields)


def v1_worker(monkeypatch) -> tuple[Any, CapturingTransferQueue]:
    """veRL's v1 `AgentLoopWorkerTQ` (unwrapped from Ray), with only what its post-processing reads set:
    no reward workers (the loop scores), no distillation, no multimodal processor."""
    from verl.trainer.ppo.v1 import agent_loop_tq

    queue = CapturingTransferQueue()
    monkeypatch.setattr(agent_loop_tq, "tq", queue)
    # keep the per-output dicts; v1_advantages batches every session's with the same veRL function
    monkeypatch.setattr(agent_loop_tq, "list_of_dict_to_tensordict", lambda dicts: dicts)
    worker = object.__new__(agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__)
    worker.reward_loop_worker_handles = None
    worker.distillation_enabled = False
    worker.processor = None
    worker.mm_processor_kwargs = {}
    return worker, queue


def v1_advantages(queue: CapturingTransferQueue, n_sessions: int):
    """What veRL's v1 trainer does with the stored outputs (`PPOTrainer._compute_advantage`): pad the nested
    fields, reward = rm_scores, GRPO via `compute_advantage_for_multi_trajectories`."""
    from verl.protocol import DataProto
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    fields = list_of_dict_to_tensordict(queue.fields)
    data = fields.select("uid", "response_mask", "rm_scores", "rollout_log_probs")
    data = DataProto(batch=data.to_padded_tensor())
    data.batch["token_level_scores"] = data.batch["rm_scores"]
    data.non_tensor_batch["uid"] = np.array(data.batch.pop("uid").tolist(), dtype=object)
    data.batch["token_level_rewards"] = data.batch["token_level_scores"]
    return compute_advantage_for_multi_trajectories(
        data,
        batch_keys=queue.keys,
        adv_estimator=core_algos.AdvantageEstimator.GRPO,
        num_repeat=n_sessions,
        norm_adv_by_std_in_grpo=True,
    )


@pytest.fixture()
def hf_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))
