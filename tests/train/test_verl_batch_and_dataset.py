"""veRL's data formats without running episodes: the DataProto layout of assembled samples, the dataset parquet
through veRL's `RLHFDataset`, and `VerlServerBackend`'s handling of veRL's answers."""

from __future__ import annotations

import asyncio

import pytest
import torch

from openforge.core import FinishReason, Sample, SamplingParams
from openforge.inference import BackendError, GenerationContext
from support.rollout import make_task
from support.verl import hf_tokenizer, require_verl  # noqa: F401 - fixture


@pytest.fixture(scope="module", autouse=True)
def _verl():
    require_verl()


def sample(prompt: list[int], response: list[int], mask: list[int], reward: float, group: str) -> Sample:
    return Sample(
        token_ids=prompt + response,
        loss_mask=[0] * len(prompt) + mask,
        logprobs=[0.0] * len(prompt) + [-0.5 * m for m in mask],
        reward=reward,
        group_id=group,
        episode_id=f"e{reward}{len(prompt)}",
        prompt_length=len(prompt),
        metadata={"task": "t", "harness": "react"},
    )


def test_dataproto_left_pads_prompts_right_pads_responses_and_round_trips(tmp_path):
    from verl.protocol import DataProto

    from openforge.train.verl.batch import samples_to_dataproto

    pad = 0  # equal to a real token id below: masks must come from lengths
    samples = [sample([5, 6, 7], [8, 0, 9], [1, 0, 1], 1.0, "g"), sample([4], [3], [1], 0.0, "g")]
    batch = samples_to_dataproto(samples, pad_token_id=pad)
    assert batch.batch["prompts"].tolist() == [[5, 6, 7], [0, 0, 4]]
    assert batch.batch["responses"].tolist() == [[8, 0, 9], [3, 0, 0]]
    assert batch.batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 0, 0]]
    assert batch.batch["position_ids"].tolist()[1][2:4] == [0, 1]
    assert batch.batch["response_mask"].tolist() == [[1, 0, 1], [1, 0, 0]]
    assert batch.batch["token_level_scores"].tolist() == [[0, 0, 1.0], [0, 0, 0]]
    assert batch.batch["rollout_log_probs"].tolist() == [[-0.5, 0, -0.5], [-0.5, 0, 0]]
    assert list(batch.non_tensor_batch["uid"]) == ["g", "g"]
    batch.save_to_disk(str(tmp_path / "b.dp"))
    loaded = DataProto.load_from_disk(str(tmp_path / "b.dp"))
    for key in batch.batch.keys():  # noqa: SIM118 - iterating a TensorDict yields rows, not keys
        assert torch.equal(loaded.batch[key], batch.batch[key]), key
    assert list(loaded.non_tensor_batch["episode_id"]) == list(batch.non_tensor_batch["episode_id"])
    with pytest.raises(ValueError, match="no samples"):
        samples_to_dataproto([], pad_token_id=pad)


def test_dataset_parquet_loads_with_verls_rlhf_dataset(tmp_path, hf_tokenizer):  # noqa: F811
    from omegaconf import OmegaConf
    from typer.testing import CliRunner
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from openforge.cli import app

    for split, name in (("train", "a"), ("train", "b"), ("heldout", "c")):
        make_task(tmp_path / "tasks" / split, name)
    out = tmp_path / "train.parquet"
    result = CliRunner().invoke(
        app,
        [
            "verl",
            "dataset",
            "--tasks",
            str(tmp_path / "tasks"),
            "--harness",
            "react,claude-code",
            "--split",
            "train",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    data = RLHFDataset(
        str(out),
        hf_tokenizer,
        OmegaConf.create({"max_prompt_length": 512, "cache_dir": str(tmp_path), "filter_overlong_prompts_workers": 1}),
    )
    assert len(data) == 4  # 2 train tasks × 2 harnesses
    rows = [data[i] for i in range(len(data))]
    assert [(r["extra_info"]["task_id"], r["extra_info"]["harness"]) for r in rows] == [
        ("a", "react"),
        ("a", "claude-code"),
        ("b", "react"),
        ("b", "claude-code"),
    ]
    first = rows[0]
    assert first["agent_name"] == "openforge" and first["data_source"] == "openforge/react"
    assert first["raw_prompt"] == [{"role": "user", "content": "Task a: create done.txt.\n"}]
    assert first["index"] == 0 and first["extra_info"]["split"] == "train"
    assert (tmp_path / "tasks" / "train" / "a").samefile(first["extra_info"]["task_path"])

    bad = CliRunner().invoke(
        app, ["verl", "dataset", "--tasks", str(tmp_path / "tasks"), "--harness", "nope", "--out", str(out)]
    )
    assert bad.exit_code != 0 and "unknown harness(es) nope" in bad.output


class _Answer:
    def __init__(self, ids, logprobs, stop_reason="completed", steps=4):
        self.token_ids, self.log_probs, self.stop_reason = ids, logprobs, stop_reason
        self.extra_fields = {"global_steps": steps}


class _Client:
    def __init__(self, answer):
        self.answer, self.calls = answer, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.calls.append((request_id, sampling_params))
        return self.answer


def test_verl_server_backend_binds_episodes_and_reads_verls_answers():
    from openforge.train.verl.backend import VerlServerBackend

    backend = VerlServerBackend(max_context=100, eos_token_ids=[2])
    ctx = GenerationContext(episode_id="ep1")
    sampling = SamplingParams(temperature=0.1, max_tokens=3, stop_token_ids=[9])
    with pytest.raises(BackendError, match="not bound"):
        asyncio.run(backend.generate([1, 1], sampling, ctx))

    client = _Client(_Answer([5, 6, 2], [-1.0, -2.0, -0.5]))
    backend.bind("ep1", client, {"temperature": 0.8, "top_k": -1, "logprobs": False})
    result = asyncio.run(backend.generate([1, 1], sampling, ctx))
    assert (result.output_ids, result.logprobs, result.finish_reason) == (
        [5, 6, 2],
        [-1.0, -2.0, -0.5],
        FinishReason.stop,
    )
    assert result.policy_version == 4
    request_id, params = client.calls[0]
    assert request_id == "ep1"
    assert params == {"temperature": 0.8, "top_k": -1, "max_tokens": 3, "logprobs": True, "stop_token_ids": [2, 9]}

    client.answer = _Answer([5, 6, 7], [-1.0, -1.0, -1.0])  # max_tokens reached without a stop id
    assert asyncio.run(backend.generate([1], sampling, ctx)).finish_reason is FinishReason.length
    client.answer = _Answer([5], None)
    with pytest.raises(BackendError, match="no logprobs"):
        asyncio.run(backend.generate([1], sampling, ctx))
    client.answer = _Answer([], None, stop_reason="aborted")
    with pytest.raises(BackendError, match="aborted"):
        asyncio.run(backend.generate([1], sampling, ctx))
    backend.unbind("ep1")
    assert backend.bound_episodes == 0
