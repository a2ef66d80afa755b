"""The veRL agent loop driven end to end on CPU: veRL's registry + hydra build the loop from its YAML entry, rows
come from the dataset parquet through veRL's `RLHFDataset`, each rollout is a real `react` harness episode in a
`local` sandbox behind the real proxy, its model calls sampled by a CPU stand-in for veRL's server client
(signature checked against `LLMServerClient.generate`) running a scripted policy. The outputs then go through
veRL's own v1 post-processing (`AgentLoopWorkerTQ._agent_loop_postprocess`), its GRPO
(`compute_advantage_for_multi_trajectories`) and its policy loss, and are compared with the embedded trainer.

One task is solved by half of its sessions (rewards 1, 0, 1, 0); another's verifier is broken, so its episode
is an infrastructure failure: dropped (no output) and counted.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path

import pytest
import torch
import yaml

from openforge.core import CallRecord
from openforge.store import TrajectoryStore
from openforge.train import clipped_policy_loss, group_advantages
from support.rollout import make_task
from support.verl import (
    IDLE,
    SOLVE,
    CpuServerClientStandIn,
    fake_logprob,
    hf_tokenizer,  # noqa: F401 - fixture
    instantiate_loop,
    require_verl,
    trainer_config,
    v1_advantages,
    v1_worker,
)

SESSIONS = 4
VERL_SAMPLING = {"temperature": 0.7, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": False}


@pytest.fixture(scope="module", autouse=True)
def _verl():
    require_verl()


def loop_yaml(tmp: Path, model: Path, mode: str, agent_timeout_s: float = 60) -> Path:
    path = tmp / f"agent_loop_{mode}.yaml"
    settings = {
        "run_dir": str(tmp / "runs"),
        "model": str(model),
        "sandbox": "local",
        "sandbox_options": {"root": str(tmp / "sandboxes")},
        "mode": mode,
        "agent_timeout_s": agent_timeout_s,
        "max_attempts": 1,  # as examples/verl/agent_loop.yaml: an infrastructure failure is dropped at once
        "harness_options": {"react": {"max_steps": 3, "tools": ["bash"]}},
    }
    path.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "openforge",
                    "_target_": "openforge.train.verl.agent_loop.OpenForgeAgentLoop",
                    "openforge": settings,
                }
            ]
        )
    )
    return path


def dataset_rows(tmp: Path, tokenizer) -> list[dict]:
    """Rows as veRL's RLHFDataset hands them to the agent loop."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from openforge.train.verl.dataset import write_dataset

    tasks = tmp / "tasks"
    make_task(tasks, "make-done")
    make_task(tasks, "broken-verifier", test_sh="exit 3\n")
    write_dataset([tasks], ["react"], tmp / "train.parquet")
    data = RLHFDataset(
        str(tmp / "train.parquet"),
        tokenizer,
        OmegaConf.create(
            {"max_prompt_length": 512, "filter_overlong_prompts_workers": 1, "cache_dir": str(tmp / "cache")}
        ),
    )
    return {data[i]["extra_info"]["task_id"]: data[i] for i in range(len(data))}


def rollout_kwargs(row: dict, uid: str, session: int) -> dict:
    """What veRL's v1 worker passes to run(): the row's fields (agent_name is consumed by the worker) plus
    uid, session_id and global_steps."""
    kwargs = {k: v for k, v in row.items() if k != "agent_name"}
    return {**kwargs, "uid": uid, "session_id": session, "global_steps": 3}


async def drive(tmp: Path, model_dir: Path, tokenizer, mode: str, sessions: int) -> dict:
    from openforge.train.verl.runtime import close_worker_runtime, worker_runtime

    rows = dataset_rows(tmp, tokenizer)
    client = CpuServerClientStandIn(model_dir, scripts=[[SOLVE, "Done."], [IDLE]])
    config = trainer_config(model_dir)
    yaml_path = loop_yaml(tmp, model_dir, mode)
    kwargs = [rollout_kwargs(rows["make-done"], "uidA", s) for s in range(sessions)]
    try:
        loops = [instantiate_loop(config, client, tokenizer, yaml_path) for _ in kwargs]  # one per rollout, as veRL
        outputs = await asyncio.gather(*(loop.run(dict(VERL_SAMPLING), **kw) for loop, kw in zip(loops, kwargs)))
        broken = rollout_kwargs(rows["broken-verifier"], "uidB", 0)
        dropped = await instantiate_loop(config, client, tokenizer, yaml_path).run(dict(VERL_SAMPLING), **broken)
        runtime = await worker_runtime(loops[0].settings, model_dir, loops[0].max_context)
        counters, run_dir = dict(runtime.counters), runtime.proxy.store.run_dir
    finally:
        await close_worker_runtime()
    return {
        "outputs": outputs,
        "kwargs": kwargs,
        "dropped": dropped,
        "broken_kwargs": broken,
        "counters": counters,
        "client": client,
        "run_dir": Path(run_dir),
    }


@pytest.fixture(scope="module")
def merged(tmp_path_factory, tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    return asyncio.run(drive(tmp_path_factory.mktemp("verl-merged"), tiny_model_dir, tokenizer, "merged", SESSIONS))


def stored_calls(run_dir: Path) -> dict[str, list[CallRecord]]:
    with TrajectoryStore.open(run_dir) as store:
        return {e.id: store.list_calls(e.id) for e in store.list_episodes()}


# ---- the stand-in is veRL's client, as far as the loop can tell ------------------------------------------


def test_stand_in_has_the_signature_of_verls_server_client():
    from verl.workers.rollout.llm_server import LLMServerClient

    def shape(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert shape(CpuServerClientStandIn.generate) == shape(LLMServerClient.generate)
    assert inspect.iscoroutinefunction(LLMServerClient.generate)


# ---- the loop's outputs --------------------------------------------------------------------------------


def test_merged_episodes_become_one_output_each_with_reward_masks_and_logprobs(merged):
    calls = stored_calls(merged["run_dir"])
    rewards = []
    for outputs in merged["outputs"]:
        assert len(outputs) == 1  # react keeps continuity: one segment, one merged sample
        out = outputs[0]
        info = out.extra_fields["openforge"]
        episode_calls = calls[info["episode_id"]]
        last = episode_calls[-1]
        assert out.prompt_ids + out.response_ids == last.prompt_ids + last.output_ids
        assert out.prompt_ids == episode_calls[0].prompt_ids  # the response starts at the first sampled token
        assert info["calls"] == [c.index for c in episode_calls]
        for tid, m, lp in zip(out.response_ids, out.response_mask, out.response_logprobs):
            assert lp == (pytest.approx(fake_logprob(tid)) if m else 0.0)
        assert sum(out.response_mask) == sum(len(c.output_ids) for c in episode_calls)
        assert out.reward_score == {"passed": 1.0, "failed": 0.0}[info["outcome"]]
        assert out.extra_fields["reward_extra_info"] == {"passed": out.reward_score}
        assert out.num_turns == 2 * len(episode_calls)
        rewards.append(out.reward_score)
    assert sorted(rewards) == [0.0, 0.0, 1.0, 1.0]
    # the solving sessions made two calls (tool call, then the answer), the idle ones one
    assert sorted(len(calls[o[0].extra_fields["openforge"]["episode_id"]]) for o in merged["outputs"]) == [1, 1, 2, 2]


def test_calls_sample_with_verls_parameters_and_record_its_weights_version(merged):
    requests = merged["client"].requests
    assert requests and all(r["temperature"] == 0.7 and r["top_k"] == -1 and r["logprobs"] is True for r in requests)
    assert all(r["request_id"] in stored_calls(merged["run_dir"]) for r in requests)  # episode id = sticky session
    with TrajectoryStore.open(merged["run_dir"]) as store:
        versions = {c.policy_version for e in store.list_episodes() for c in store.list_calls(e.id)}
        steps = {(e.metadata["step"], e.metadata["verl_uid"]) for e in store.list_episodes()}
    assert versions == {7}  # TokenOutput.extra_fields["global_steps"]
    assert steps == {(3, "uidA"), (3, "uidB")}


def test_react_asks_for_the_loops_token_cap(merged):
    """The loop's `max_new_tokens` caps the proxy and reaches the harness as its own per-reply cap (react's
    `max_tokens`): a harness asking for fewer would cut replies the proxy allows (it once asked for 1,024 while
    the proxy allowed 4,096)."""
    from openforge.train.verl.config import VerlLoopConfig

    cap = VerlLoopConfig().max_new_tokens  # the loop YAML leaves it at its default
    asked = [
        json.loads(c.request_body)["max_tokens"] for calls in stored_calls(merged["run_dir"]).values() for c in calls
    ]
    assert asked and set(asked) == {cap}


def test_infrastructure_failure_is_dropped_and_counted(merged):
    assert merged["dropped"] == []
    counters = merged["counters"]
    assert counters["episodes"] == SESSIONS + 1
    assert counters["dropped/verifier_error"] == 1
    assert counters["samples"] == SESSIONS
    with TrajectoryStore.open(merged["run_dir"]) as store:
        outcomes = sorted(e.outcome.value for e in store.list_episodes())
    assert outcomes == ["failed", "failed", "passed", "passed", "verifier_error"]


# ---- through veRL's own post-processing, GRPO and loss ---------------------------------------------------


def test_verl_v1_postprocess_grpo_and_loss_agree_with_the_embedded_trainer(merged, monkeypatch):
    from verl.trainer.ppo import core_algos
    from verl.workers.config import ActorConfig

    worker, queue = v1_worker(monkeypatch)

    async def postprocess():
        for outputs, kwargs in zip(merged["outputs"], merged["kwargs"]):
            await worker._agent_loop_postprocess(outputs, False, **kwargs)
        await worker._agent_loop_postprocess(merged["dropped"], False, **merged["broken_kwargs"])

    asyncio.run(postprocess())
    assert sorted(queue.keys) == [f"uidA_{s}_0" for s in range(SESSIONS)]  # the dropped episode stored nothing
    data = v1_advantages(queue, SESSIONS)

    rewards = [o[0].reward_score for o in merged["outputs"]]
    ours = group_advantages(rewards, ["uidA"] * SESSIONS)
    order = [int(k.split("_")[1]) for k in queue.keys]
    mask = data.batch["response_mask"].float()
    expected = ours[order][:, None] * mask
    assert (data.batch["advantages"] - expected).abs().max() < 1e-6
    assert ours.abs().min() > 0.5  # rewards 1, 0, 1, 0: every session carries signal

    # veRL's vanilla policy loss, old = the rollout logprobs the loop returned, a moved policy as new
    old = data.batch["rollout_log_probs"]
    new = old + (torch.rand(old.shape, generator=torch.Generator().manual_seed(0)) - 0.5) * mask
    config = ActorConfig(
        strategy="fsdp",
        rollout_n=SESSIONS,
        ppo_micro_batch_size_per_gpu=1,
        clip_ratio=0.2,
        clip_ratio_low=0.2,
        clip_ratio_high=0.2,
        clip_ratio_c=3.0,
        loss_agg_mode="token-mean",
    )
    theirs, _ = core_algos.get_policy_loss_fn("vanilla")(
        old_log_prob=old,
        log_prob=new,
        advantages=data.batch["advantages"],
        response_mask=mask,
        loss_agg_mode="token-mean",
        config=config,
    )
    mine = clipped_policy_loss(new, old, expected, mask, clip_low=0.2, clip_high=0.2, clip_ratio_c=3.0)
    assert abs(float(mine.loss) - float(theirs)) < 1e-6
    assert torch.isfinite(theirs) and float(theirs) != 0.0


def test_per_call_mode_gives_one_output_per_call(tmp_path, tiny_model_dir, hf_tokenizer):  # noqa: F811
    result = asyncio.run(drive(tmp_path, tiny_model_dir, hf_tokenizer, "per-call", 2))
    calls = stored_calls(result["run_dir"])
    for outputs in result["outputs"]:
        episode_calls = calls[outputs[0].extra_fields["openforge"]["episode_id"]]
        assert len(outputs) == len(episode_calls)
        for out, call in zip(outputs, episode_calls):
            assert out.prompt_ids == call.prompt_ids and out.response_ids == call.output_ids
            assert out.response_mask == [1] * len(call.output_ids)
            assert out.reward_score == outputs[-1].reward_score
    assert sorted(len(o) for o in result["outputs"]) == [1, 2]


def test_an_agent_that_hangs_is_trained_on_as_a_failure(tmp_path, tiny_model_dir, hf_tokenizer):  # noqa: F811
    """Training sees the orchestrator's outcome classes: an agent that runs past its timeout is the agent's
    failure — an output with reward 0, not a dropped episode — so a `sleep` cannot hide a bad reward."""
    from openforge.train.verl.runtime import close_worker_runtime, worker_runtime

    hang = "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": "sleep 600"}}) + "\n</tool_call>"
    rows = dataset_rows(tmp_path, hf_tokenizer)
    client = CpuServerClientStandIn(tiny_model_dir, scripts=[[hang]])
    config = trainer_config(tiny_model_dir)
    yaml_path = loop_yaml(tmp_path, tiny_model_dir, "merged", agent_timeout_s=5)

    async def go():
        try:
            loop = instantiate_loop(config, client, hf_tokenizer, yaml_path)
            outputs = await loop.run(dict(VERL_SAMPLING), **rollout_kwargs(rows["make-done"], "uidH", 0))
            runtime = await worker_runtime(loop.settings, tiny_model_dir, loop.max_context)
            return outputs, dict(runtime.counters)
        finally:
            await close_worker_runtime()

    outputs, counters = asyncio.run(go())
    (out,) = outputs
    info = out.extra_fields["openforge"]
    assert info["outcome"] == "failed" and out.reward_score == 0.0 and sum(out.response_mask) > 0
    assert counters["failed/agent"] == 1 and not [k for k in counters if k.startswith("dropped/")]


def test_legacy_trainer_is_refused_with_the_reason(tmp_path, tiny_model_dir, hf_tokenizer):  # noqa: F811
    config = trainer_config(tiny_model_dir)
    config.trainer.use_v1 = False
    client = CpuServerClientStandIn(tiny_model_dir, scripts=[[IDLE]])
    from hydra.errors import InstantiationException

    with pytest.raises(InstantiationException, match="use_v1=true"):  # hydra wraps the loop's ValueError
        instantiate_loop(config, client, hf_tokenizer, loop_yaml(tmp_path, tiny_model_dir, "merged"))


# ---- the run the loop recorded, exported offline as a DataProto ------------------------------------------


@pytest.mark.parametrize("mode", ["merged", "per-call"])
def test_exported_run_round_trips_and_gives_the_embedded_trainers_advantages(merged, tmp_path, mode):
    from typer.testing import CliRunner
    from verl.protocol import DataProto
    from verl.trainer.ppo import core_algos

    from openforge.cli import app
    from openforge.train.assemble import assemble_run
    from openforge.train.verl.batch import samples_to_dataproto

    out = tmp_path / f"{mode}.dataproto"
    result = CliRunner().invoke(
        app, ["export", str(merged["run_dir"]), "--format", "verl", "--mode", mode, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "1 dropped" in result.output  # the broken verifier's episode
    loaded = DataProto.load_from_disk(str(out))

    samples, _ = assemble_run(merged["run_dir"], mode=mode)
    assert len(loaded) == len(samples) == (SESSIONS if mode == "merged" else 6)  # 2 solving × 2 calls + 2 idle
    again = samples_to_dataproto(samples, pad_token_id=_pad_id(merged["run_dir"]))
    for key in again.batch.keys():  # noqa: SIM118 - iterating a TensorDict yields rows, not keys
        assert torch.equal(loaded.batch[key], again.batch[key]), key
    assert list(loaded.non_tensor_batch["uid"]) == [s.group_id for s in samples]

    theirs, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=loaded.batch["token_level_scores"],
        response_mask=loaded.batch["response_mask"].float(),
        index=loaded.non_tensor_batch["uid"],
        epsilon=1e-6,
        norm_adv_by_std_in_grpo=True,
    )
    ours = group_advantages([s.reward for s in samples], [s.group_id for s in samples])
    assert (theirs - ours[:, None] * loaded.batch["response_mask"]).abs().max() < 1e-6
    assert ours.abs().max() > 0.5


def _pad_id(run_dir: Path) -> int:
    from openforge.models import ModelDir

    with TrajectoryStore.open(run_dir) as store:
        return ModelDir(store.get_run_info()["model"]).pad_token_id
