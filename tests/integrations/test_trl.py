"""OpenForge's episodes as TRL's rollout source (`openforge.integrations.trl`), checked against TRL's own trainer.

- Real TRL GRPO steps (TRL 1.16's `GRPOTrainer`, its collation and loss) on the tiny model, with episodes run
  by the orchestrator through the react harness in the local sandbox:
  - a scripted policy that calls a tool and then answers: every row TRL builds holds exactly the tokens the
    proxy recorded, its loss mask is 1 on every sampled token and 0 on every tool-output and template token;
    on that fixed batch TRL's per-token logprobs, loss and gradients equal OpenForge's own (`train.losses`)
    on the samples the assembler makes of the same episodes;
  - the embedded engine sampling the policy being trained: the trainer's weights are pushed before each batch
    (the policy version on every recorded call is the batch's), and TRL's logprobs of the sampled tokens equal
    the behaviour logprobs the engine recorded.
- The rows of broken-continuity episodes, infrastructure failures and groups that overflow (pure), and TRL
  taking such a batch: blank rows get no gradient and no advantage, segment rows the episode's reward.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch
from trl import GRPOConfig, GRPOTrainer

from conftest import managed_containers
from openforge.core import CallRecord, Episode, Outcome
from openforge.integrations.trl import (
    OpenForgeRollout,
    TRLRolloutError,
    learnable_pool,
    openforge_reward,
    task_dataset,
)
from openforge.integrations.trl_rows import blank_row, episode_rows, pack_groups, trl_columns
from openforge.rollout import RolloutConfig
from openforge.rollout.orchestrator import run_label
from openforge.store import TrajectoryStore
from openforge.train import assemble_run
from openforge.train.batching import collate
from openforge.train.losses import clipped_policy_loss, token_logprobs
from support.paths import POLICIES
from support.rollout import IMAGE_MAP, make_task
from support.signals import default_sigint

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
REACT = {"react": {"max_steps": 2, "tools": ["bash"], "system_prompt": ""}}
# from /dev/urandom, not bash's $RANDOM: that is seeded by the PID and the time, the same in sandboxes graded at once
# in their own PID namespaces (a whole group then scored alike)
RANDOM_REWARD = "mkdir -p /logs/verifier\necho $(( $(od -An -N1 -tu1 /dev/urandom) % 2 )) > /logs/verifier/reward.txt\n"


def rollout_config(tmp_path, model, tasks, backend: str, max_new_tokens: int = 64) -> RolloutConfig:
    return RolloutConfig(
        tasks=[tasks],
        harnesses=["react"],
        sandbox="local",
        model=model,
        backend=backend,
        run=tmp_path / "run",
        image_map=IMAGE_MAP,
        max_attempts=1,
        sandbox_options={"root": str(tmp_path / "sandboxes")},
        harness_options=REACT,
        max_new_tokens=max_new_tokens,
        concurrency=4,
    )


def grpo_config(tmp_path, steps: int, lr: float) -> GRPOConfig:
    return GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=steps,
        learning_rate=lr,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        temperature=1.0,
        bf16=False,  # TRL's default is bf16 autocast, on CPU too; the engine samples in float32
        seed=0,
    )


@dataclass
class Trained:
    """A TRL run: what the rollout returned per batch, the batches TRL built (in the rollout's row order), the
    (shuffled) batches its loss took and the per-token logprobs it computed there, before each update."""

    trainer: GRPOTrainer
    returned: list[dict] = field(default_factory=list)
    batches: list[dict] = field(default_factory=list)
    trained: list[dict] = field(default_factory=list)
    logps: list[torch.Tensor] = field(default_factory=list)


def train(tmp_path, model, rollout, task_ids: list[str], steps: int, lr: float) -> Trained:
    """Real TRL GRPO steps with `rollout`, recording what `Trained` holds."""
    returned: list[dict] = []

    def recorded_rollout(prompts, trainer):
        out = rollout(prompts, trainer)
        returned.append(out)
        return out

    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=openforge_reward,
        args=grpo_config(tmp_path, steps, lr),
        train_dataset=task_dataset(task_ids),
        rollout_func=recorded_rollout,
    )
    run = Trained(trainer, returned)
    score, compute = trainer._generate_and_score_completions, trainer._compute_loss
    forward = trainer._get_per_token_logps_and_entropies

    def keep_batch(inputs):
        batch = score(inputs)
        run.batches.append({k: v.clone() if torch.is_tensor(v) else v for k, v in batch.items()})
        return batch

    def keep_loss(model, inputs):
        run.trained.append(inputs)
        return compute(model, inputs)

    def keep_logps(*args, **kwargs):
        result = forward(*args, **kwargs)
        if len(run.logps) < len(run.trained):  # the loss's forward (not a later one)
            run.logps.append(result[0].detach().clone())
        return result

    trainer._generate_and_score_completions = keep_batch
    trainer._compute_loss = keep_loss
    trainer._get_per_token_logps_and_entropies = keep_logps
    trainer.train()
    trainer._compute_loss, trainer._get_per_token_logps_and_entropies = compute, forward
    return run


def rows_of(batch: dict) -> list[tuple[list[int], list[int]]]:
    """Each row of TRL's batch as (its tokens without padding, its loss mask over them: 0 on the prompt)."""
    out = []
    loss_mask = batch["completion_mask"] * batch.get("tool_mask", 1)
    for i in range(batch["prompt_ids"].shape[0]):
        prompt = batch["prompt_ids"][i][batch["prompt_mask"][i].bool()].tolist()
        keep = batch["completion_mask"][i].bool()
        completion = batch["completion_ids"][i][keep].tolist()
        out.append((prompt + completion, [0] * len(prompt) + loss_mask[i][keep].tolist()))
    return out


def recorded(calls: list[CallRecord]) -> tuple[list[int], list[int]]:
    """What the proxy recorded of a one-segment episode: the last call's prompt + output, and 1 exactly where a
    call's output was sampled."""
    last = calls[-1]
    ids = last.prompt_ids + last.output_ids
    mask = [0] * len(ids)
    for call in calls:
        start = len(call.prompt_ids)
        assert ids[start : start + len(call.output_ids)] == call.output_ids
        mask[start : start + len(call.output_ids)] = [1] * len(call.output_ids)
    return ids, mask


@pytest.fixture
def two_tasks(tmp_path):
    tasks = tmp_path / "tasks"
    for task_id in ("t-a", "t-b"):
        make_task(tasks, task_id)
    return tasks


def test_trl_trains_exactly_the_recorded_tokens(local_ready, tmp_path, tiny_model_dir, two_tasks):
    config = rollout_config(tmp_path, tiny_model_dir, two_tasks, f"scripted:{POLICIES / 'trl_touch_or_skip.py'}")
    with OpenForgeRollout(config) as rollout:
        run = train(tmp_path, tiny_model_dir, rollout, ["t-a", "t-b"], steps=2, lr=1e-3)
    trainer, returned, batches = run.trainer, run.returned, run.batches
    assert [s.episodes for s in rollout.history] == [4, 4]
    with TrajectoryStore.open(tmp_path / "run") as store:
        for out, batch in zip(returned, batches, strict=True):
            for episode_id, (ids, mask) in zip(out["openforge_episode"], rows_of(batch), strict=True):
                calls = store.list_calls(episode_id)
                assert len(calls) == 2  # a tool call, then the answer: a tool result between the two outputs
                want_ids, want_mask = recorded(calls)
                assert ids == want_ids
                # a tool-output token trained on, or a sampled one dropped, fails here
                assert mask == want_mask
            assert batch["advantages"].abs().sum() > 0  # the group had signal: the loss below is not trivially 0

    # The last batch, fixed: TRL's logprobs, loss and gradients against OpenForge's on the assembler's samples
    batch, episodes = batches[-1], returned[-1]["openforge_episode"]
    samples, _ = assemble_run(tmp_path / "run", episodes=episodes)
    by_episode = {s.episode_id: s for s in samples}
    ordered = [by_episode[e] for e in episodes]
    model = trainer.model
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]

    trainer_loss = trainer._compute_loss(model, batch)
    trainer_grads = torch.autograd.grad(trainer_loss, params)
    with torch.no_grad():
        trl_logps, _, _ = trainer._get_per_token_logps_and_entropies(
            model,
            torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1),
            torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1),
            batch["completion_ids"].shape[1],
        )

    ours = collate(ordered, pad_id=0, advantages=batch["advantages"].tolist(), default_temperature=1.0)
    new = token_logprobs(model, ours)
    our_loss = clipped_policy_loss(new, new.detach(), ours.advantages, ours.loss_mask, 0.2, 0.2).loss
    our_grads = torch.autograd.grad(our_loss, params)

    loss_mask = batch["completion_mask"] * batch["tool_mask"]
    for row in range(len(ordered)):
        theirs = trl_logps[row][loss_mask[row].bool()]
        mine = new[row][ours.loss_mask[row].bool()].detach()
        assert theirs.shape == mine.shape
        torch.testing.assert_close(theirs, mine, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(trainer_loss.detach(), our_loss.detach(), atol=1e-6, rtol=1e-5)
    for theirs, mine in zip(trainer_grads, our_grads, strict=True):
        torch.testing.assert_close(theirs, mine, atol=1e-6, rtol=1e-4)


def test_embedded_engine_samples_the_policy_being_trained(local_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    for task_id in ("r-a", "r-b"):
        make_task(tasks, task_id, test_sh=RANDOM_REWARD)  # a random reward: groups with signal, weights that move
    config = rollout_config(tmp_path, tiny_model_dir, tasks, "embedded", max_new_tokens=16)
    with OpenForgeRollout(config) as rollout:
        run = train(tmp_path, tiny_model_dir, rollout, ["r-a", "r-b"] * 2, steps=3, lr=1e-2)
    returned, batches = run.returned, run.batches
    # a push before each batch: the versions 1, 2, 3, and every sampled token recorded under its batch's version
    assert [s.policy_version for s in rollout.history] == [1, 2, 3]
    for stats, out in zip(rollout.history, returned, strict=True):
        assert {v for versions in out["openforge_versions"] for v in versions} == {stats.policy_version}
    assert any(b["advantages"].abs().sum() > 0 for b in batches[:-1])  # the weights moved before a later batch
    # TRL's logprobs of the sampled tokens in its loss (on the weights it then updates) = what the engine recorded
    for batch, theirs in zip(run.trained, run.logps, strict=True):
        mask = (batch["completion_mask"] * batch["tool_mask"]).bool()
        assert mask.any()
        torch.testing.assert_close(theirs[mask], batch["sampling_per_token_logps"][mask], atol=2e-4, rtol=1e-4)


def test_pass_rates_screen_the_starting_policy_for_learnable_tasks(local_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    make_task(tasks, "always", test_sh="mkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n")
    make_task(tasks, "never", test_sh="mkdir -p /logs/verifier\necho 0 > /logs/verifier/reward.txt\n")
    make_task(tasks, "coin", test_sh=RANDOM_REWARD)
    config = rollout_config(tmp_path, tiny_model_dir, tasks, f"scripted:{POLICIES / 'trl_touch_or_skip.py'}")
    with OpenForgeRollout(config) as rollout:
        rates = rollout.pass_rates(["always", "never"], 2, temperature=1.0)
        rates |= rollout.pass_rates(["coin"], 12, temperature=1.0)
        with pytest.raises(TRLRolloutError, match="no tasks"):
            rollout.pass_rates(["missing"], 1, temperature=1.0)
        with pytest.raises(TRLRolloutError, match="temperature: the episodes sample with 1.0"):
            rollout.pass_rates(["always"], 1, temperature=0.5)  # TRL's batches would sample unlike the screening
        assert rollout.history == []  # a screening is no training batch
    assert rates["always"] == 1.0 and rates["never"] == 0.0
    assert 0.0 < rates["coin"] < 1.0  # 12 fair coins all equal: p = 1/2048
    assert learnable_pool(rates, 4) == ["coin"]
    assert learnable_pool({"a": 0.25, "b": 0.5, "c": 0.9, "d": 0.0}, 2) == ["b", "a"]


KILLED_TRAINER = """
import sys
from pathlib import Path
from openforge.integrations.trl import OpenForgeRollout
from openforge.rollout import RolloutConfig

with OpenForgeRollout(RolloutConfig.model_validate_json(Path(sys.argv[1]).read_text())) as rollout:
    rollout.pass_rates(["k-a", "k-b"], 6, temperature=1.0)
"""


@pytest.mark.slow
def test_a_killed_training_script_leaves_no_sandbox(docker_ready, tmp_path, tiny_model_dir):
    for name in ("k-a", "k-b"):
        make_task(tmp_path / "tasks", name)
    policy = f"scripted:{POLICIES / 'slow_then_done.py'}"  # 12 episodes of a few seconds, 4 at a time
    config = rollout_config(tmp_path, tiny_model_dir, tmp_path / "tasks", policy)
    config = config.model_copy(update={"sandbox": "docker", "sandbox_options": {}, "warm_sandboxes": 2})
    (tmp_path / "config.json").write_text(config.model_dump_json())
    script = tmp_path / "train.py"
    script.write_text(KILLED_TRAINER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "config.json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_sigint,
    )
    label = run_label(tmp_path / "run")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not [n for n in managed_containers() if label in n]:
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[0][-2000:]
    assert [n for n in managed_containers() if label in n]  # episodes (and warm sandboxes) are up
    proc.send_signal(signal.SIGTERM)  # `kill`: handled as Ctrl-C, so the rollout's close() runs
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, out[-2000:]
    assert not [n for n in managed_containers() if label in n], out[-2000:]


# ---- rows: broken continuity, infrastructure failures, full groups -------------------------------------------


def _episode(eid: str, reward: float | None, outcome: Outcome) -> Episode:
    return Episode(id=eid, key=eid, task="t", harness="react", outcome=outcome, reward=reward, metadata={"final": True})


def _calls(eid: str, segments: list[int], breaks: dict[int, str] | None = None) -> list[CallRecord]:
    """Calls of one episode: call k in `segments[k]`; within a segment each call extends the one before."""
    calls: list[CallRecord] = []
    last: dict[int, CallRecord] = {}
    for k, segment in enumerate(segments):
        before = last.get(segment)
        prompt = (before.prompt_ids + before.output_ids if before else [5, 6 + segment]) + [90, 91]  # tool output
        call = CallRecord(
            episode_id=eid,
            index=k,
            prompt_ids=prompt,
            output_ids=[100 + 10 * k, 101 + 10 * k, 2],
            output_logprobs=[-0.5, -0.25, -0.125],
            segment=segment,
            break_reason=(breaks or {}).get(k),
            policy_version=3,
        )
        calls.append(call)
        last[segment] = call
    return calls


BLANK = 2  # the "end of turn" of these made-up ids


def test_rows_of_broken_failed_and_overflowing_episodes():
    whole = episode_rows(_episode("whole", 1.0, Outcome.passed), _calls("whole", [0, 0]), BLANK)
    broken = episode_rows(
        _episode("broken", 0.0, Outcome.failed), _calls("broken", [0, 1], {1: "history_rewritten"}), BLANK
    )
    crashed = episode_rows(_episode("crashed", None, Outcome.sandbox_error), _calls("crashed", [0]), BLANK)
    late = episode_rows(_episode("late", 1.0, Outcome.passed), _calls("late", [0]), BLANK)
    assert [e.kind for e in (whole, broken, crashed, late)] == ["merged", "segments", "infrastructure", "merged"]

    (row,) = whole.rows  # both outputs in one row, the tool output between them masked
    assert row.prompt_ids == [5, 6, 90, 91]
    assert row.completion_ids == [100, 101, 2, 90, 91, 110, 111, 2]
    assert row.env_mask == [1, 1, 1, 0, 0, 1, 1, 1]
    assert row.logprobs == [-0.5, -0.25, -0.125, 0.0, 0.0, -0.5, -0.25, -0.125]
    assert (row.reward, row.versions) == (1.0, (3,))
    assert [(r.segment, r.reward, r.completion_ids) for r in broken.rows] == [
        (0, 0.0, [100, 101, 2]),
        (1, 0.0, [110, 111, 2]),
    ]
    assert crashed.rows == [blank_row(BLANK, "crashed")] and crashed.rows[0].reward is None

    # whole (1) + broken (2) + crashed (1) fill 4 slots: `late` is left out; 5 segments never fit 4 slots
    five = episode_rows(_episode("five", 1.0, Outcome.passed), _calls("five", [0, 1, 2, 3, 4]), BLANK)
    packed = pack_groups([[whole, broken, crashed, late], [five]], 4, BLANK)
    assert [r.episode_id for r in packed.rows] == ["whole", "broken", "broken", "crashed", None, None, None, None]
    s = packed.stats
    assert (s.episodes, s.graded, s.rows) == (5, 4, 8)
    assert (s.broken_episodes, s.segment_rows, s.infrastructure_failures, s.left_out, s.padding) == (1, 2, 1, 2, 4)
    assert s.trained_tokens == 6 + 3 + 3
    assert s.reward == pytest.approx(0.75) and s.pass_rate == pytest.approx(0.75)
    columns = trl_columns(packed.rows)
    assert columns["openforge_reward"] == [1.0, 0.0, 0.0, None, None, None, None, None]
    assert all(len(c) == len(m) for c, m in zip(columns["completion_ids"], columns["env_mask"]))


def test_trl_gives_blank_rows_no_gradient_and_segments_their_reward(tmp_path, tiny_model_dir):
    """TRL's own trainer on a batch of packed rows (no episodes run): a blank row (infrastructure failure,
    padding) has advantage 0 and loss mask 0, a broken episode's segments carry its reward."""
    whole = episode_rows(_episode("whole", 1.0, Outcome.passed), _calls("whole", [0, 0]), BLANK)
    broken = episode_rows(
        _episode("broken", 0.0, Outcome.failed), _calls("broken", [0, 1], {1: "history_rewritten"}), BLANK
    )
    crashed = episode_rows(_episode("crashed", None, Outcome.sandbox_error), [], BLANK)
    packed = pack_groups([[whole, broken, crashed]], 4, BLANK)
    assert packed.stats.padding == 0

    batches = []
    trainer = GRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=openforge_reward,
        args=grpo_config(tmp_path, steps=1, lr=1e-3),
        train_dataset=task_dataset(["t"]),
        rollout_func=lambda prompts, trainer: {**trl_columns(packed.rows), "openforge_stats": {}},
    )
    score = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda inputs: batches.append(score(inputs)) or batches[-1]
    trainer.train()
    (batch,) = batches
    advantages = batch["advantages"].tolist()
    loss_mask = (batch["completion_mask"] * batch["tool_mask"]).sum(dim=1).tolist()
    # rewards 1, 0, 0 (the two segments), None: the baseline is over the three scored rows
    assert advantages[0] > 0 and advantages[1] == advantages[2] < 0 and advantages[3] == 0.0
    assert loss_mask == [6, 3, 3, 0]


def test_a_config_trl_cannot_train_is_refused(tmp_path, tiny_model_dir, two_tasks):
    with pytest.raises(TRLRolloutError, match="harnesses"):
        OpenForgeRollout(
            rollout_config(tmp_path, tiny_model_dir, two_tasks, "embedded").model_copy(
                update={"harnesses": ["react", "codex"]}
            )
        )
    rollout = OpenForgeRollout(rollout_config(tmp_path, tiny_model_dir, two_tasks, "embedded"))
    with pytest.raises(TRLRolloutError, match="num_generations"):
        rollout._groups(["t-a", "t-a", "t-b"], 2)
    with pytest.raises(TRLRolloutError, match="task ids"):
        rollout._groups([[{"role": "user", "content": "hi"}]] * 2, 2)
    # TRL scores at its own temperature: episodes sampled at another one would be trained as if they were not
    config = rollout_config(tmp_path, tiny_model_dir, two_tasks, "embedded").model_copy(update={"top_p": 0.9})
    with pytest.raises(TRLRolloutError, match="top_p"):
        OpenForgeRollout(config)._start(temperature=1.0, top_p=1.0)
    # a vLLM server only TRL can push weights into: without TRL's sync it would serve the first policy forever
    remote = OpenForgeRollout(rollout_config(tmp_path, tiny_model_dir, two_tasks, "vllm:http://127.0.0.1:9"))
    trainer_without_vllm = SimpleNamespace(state=SimpleNamespace(global_step=3), use_vllm=False)  # TRL's fields
    with pytest.raises(TRLRolloutError, match="use_vllm=True"):
        remote._sync(trainer_without_vllm)
