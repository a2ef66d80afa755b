"""GRPO against **one** proxy for the whole stage (RUN/rl). Each step runs `prompts` tasks × harnesses ×
`group` episodes — generated families with only `react` in process (`run_family_episodes`), everything else
through the orchestrator's episode runner in sandboxes —, assembles the step's episodes (GRPO groups are
(step, task, harness)), updates the policy, saves RUN/checkpoints/rl, pushes the weights into the proxy (the
policy version increments) and appends a `StepRecord` to RUN/steps.jsonl, with each task's results, the tasks
dropped as saturated or impossible (`rl.drop_after`, `difficulty.py`) and what groups without signal cost. With
`evaluation: curve`, held-out pass@1 before the first step, every `eval_every` steps and after the last.

`--resume` continues from RUN/checkpoints/rl (weights, optimizer, RNG, step) and RUN/steps.jsonl; policy
versions go on from the last pushed one.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.progress import Progress

from openforge.core import Episode
from openforge.core.cpu import machine_cores, machine_cpu_seconds
from openforge.models import ModelDir
from openforge.proxy.server import RunningProxy
from openforge.rollout.family import run_family_episodes
from openforge.rollout.orchestrator import plan, run_label, run_slots
from openforge.sandbox import SandboxProvider
from openforge.store import TrajectoryStore
from openforge.train.assemble import assemble_run
from openforge.train.checkpoint import read_trainer_state, restore_rng, save_checkpoint
from openforge.train.context import RunContext
from openforge.train.data import step_instances, step_tasks
from openforge.train.difficulty import DifficultyTracker, no_signal_cost, task_results
from openforge.train.errors import TrainInterrupted
from openforge.train.evaluation import evaluate
from openforge.train.grpo import GRPOTrainer
from openforge.train.lora import trainable_model
from openforge.train.progress import progress_bar
from openforge.train.records import (
    EVALS_FILE,
    STEPS_FILE,
    EvalRecord,
    StepRecord,
    append_jsonl,
    read_evals,
    read_steps,
    write_jsonl,
)
from openforge.train.serving import rollout_config, sandboxes, serving
from openforge.train.stored import stored_episode
from openforge.train.weights_sync import WeightPusher

if TYPE_CHECKING:
    from openforge.train.lora import Policy

RL_DIR = "rl"  # under RUN/checkpoints


@dataclass
class RLState:
    model: Policy
    trainer: GRPOTrainer
    serve: Path  # what the proxy serves first
    next_step: int
    steps: list[StepRecord]
    evals: list[EvalRecord]
    difficulty: DifficultyTracker


@dataclass
class StepEnv:
    ctx: RunContext
    proxy: RunningProxy
    provider: SandboxProvider | None
    progress: Progress
    pusher: WeightPusher


@dataclass
class StepEpisode:
    """What a step needs of one final episode."""

    id: str
    reward: float | None  # None: an infrastructure failure (not graded)
    harness: str
    task: str = ""
    seconds: float = 0.0  # its wall time


def episode_seconds(episode: Episode) -> float:
    """An episode's wall time: the runner's own measure, else from its creation to its end."""
    total = (episode.metadata.get("timings") or {}).get("total_s")
    if total is None and episode.ended_at is not None:
        total = episode.ended_at - episode.created_at
    return float(total or 0.0)


def rl_checkpoint(ctx: RunContext) -> Path:
    return ctx.run / "checkpoints" / RL_DIR


def restore_or_start(ctx: RunContext, start: Path, resume: bool) -> RLState:
    rl, rl_path = ctx.config.rl, rl_checkpoint(ctx)
    pad = ModelDir(ctx.model_path).pad_token_id
    grpo = rl.grpo_config()
    if resume and (rl_path / "model.safetensors").is_file():
        saved = read_trainer_state(rl_path)
        model = trainable_model(
            ctx.model_path, ctx.config.lora, rl_path, activation_checkpointing=ctx.config.activation_checkpointing
        )
        restore_rng(saved)  # after loading, which may draw from them
        trainer = GRPOTrainer(model, grpo, pad_id=pad, step_count=saved.step)
        if saved.optimizer is not None:
            trainer.optimizer.load_state_dict(saved.optimizer)
        next_step = int(saved.extra.get("rl_step", 0))
        serve = rl_path
        ctx.console.print(f"resuming after RL step {next_step - 1} from {rl_path}")
    else:
        model = trainable_model(
            ctx.model_path, ctx.config.lora, start, activation_checkpointing=ctx.config.activation_checkpointing
        )
        trainer, next_step, serve = GRPOTrainer(model, grpo, pad_id=pad), 0, start
    # records past the checkpoint (a crash between the two writes) are dropped: those steps run again; the
    # policies' evaluation is done again at the end
    steps = [r for r in read_steps(ctx.run) if r.step < next_step]
    evals = [r for r in read_evals(ctx.run) if r.after_steps <= next_step and ctx.config.evaluation == "curve"]
    write_jsonl(ctx.run / STEPS_FILE, steps)
    write_jsonl(ctx.run / EVALS_FILE, evals)
    difficulty = DifficultyTracker.replay(rl.drop_after, (r.task_results for r in steps))
    return RLState(model, trainer, serve, next_step, steps, evals, difficulty)


async def rl_stage(ctx: RunContext, start: Path, resume: bool) -> RLState:
    """The GRPO steps from policy `start` (or the RL checkpoint when resuming), within `rl.steps` and
    `rl.seconds`; returns the state with every step's record."""
    c, console = ctx.config, ctx.console
    state = restore_or_start(ctx, start, resume)
    curve = c.evaluation == "curve"
    # a resumed run goes on counting policy versions from its last pushed weights
    version = state.steps[-1].policy_version if state.steps else 0
    async with (
        sandboxes(ctx) as provider,
        serving(c, state.serve, ctx.run / "rl", c.rl.temperature, policy_version=version) as proxy,
    ):
        started = time.monotonic() - (state.steps[-1].elapsed_s if state.steps else 0.0)
        proxy.store.set_run_info({"train": c.model_dump(mode="json")})
        superseded = supersede_untrained(proxy.store, state.next_step)
        if superseded:
            console.print(f"{superseded} episode(s) of steps not trained before the run stopped: run again")
        with progress_bar(console) as progress:
            budget = c.rl.seconds  # the bar counts seconds against it when set, else steps
            bar = progress.add_task(
                "GRPO",
                total=budget if budget is not None else c.rl.steps,
                completed=0 if budget is not None else state.next_step,
                info="",
            )
            env = StepEnv(ctx, proxy, provider, progress, WeightPusher(proxy, version))
            if curve and not state.evals:
                state.evals.append(await evaluate_during(env, state, state.serve))
            step = state.next_step
            meter = CpuMeter()
            admission = Admission(env, state, started)
            try:
                while step < c.rl.steps and not over_budget(ctx, started):
                    if (
                        not c.in_process
                        and c.tasks.dirs is not None
                        and len(state.difficulty.dropped) >= len(ctx.data.train_tasks)
                    ):
                        console.print(
                            "[yellow]every training task saturated or stayed impossible[/] (rl.drop_after): GRPO stops"
                        )
                        break
                    admission.admit(step)
                    record = await rl_step(env, state, step, await admission.take(step), started)
                    if record is None:  # the step is not trained on; steps before it are saved
                        raise TrainInterrupted(f"GRPO step {step}")
                    state.steps.append(record)
                    append_jsonl(ctx.run / STEPS_FILE, record)
                    ctx.loggers.log_step(record)
                    progress.update(
                        bar,
                        completed=min(budget, record.elapsed_s) if budget is not None else step + 1,
                        info=summary_line(record),
                    )
                    console.print(summary_line(record))
                    step += 1
                    if curve and step % c.rl.eval_every == 0:
                        state.evals.append(await evaluate_during(env, state, rl_checkpoint(ctx)))
            finally:  # episodes of steps that will not be trained (budget, interruption): stopped, not waited for
                await admission.close()
                await env.pusher.settle()  # the last policy is served (and its push's failure raised)
                ctx.grpo_cpu = meter.read()
            if curve and state.steps and state.evals[-1].after_steps != len(state.steps):
                state.evals.append(await evaluate_during(env, state, rl_checkpoint(ctx)))
    return state


class CpuMeter:
    """How busy the machine kept during GRPO: CPU seconds of this process and its reaped children (the jails,
    the sandboxes' clients) against wall seconds × the cores it may run on (`share`), and the whole machine's
    busy CPU seconds against wall seconds × its cores (`machine_share`: the kernel's work for the jails, Docker
    and anything else running count there, not in `share`)."""

    def __init__(self) -> None:
        self.cpu, self.machine, self.wall = self._cpu(), machine_cpu_seconds(), time.monotonic()

    @staticmethod
    def _cpu() -> float:
        me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime

    def read(self) -> dict[str, float]:
        cpu, wall = self._cpu() - self.cpu, time.monotonic() - self.wall
        cores = len(os.sched_getaffinity(0))
        out = {
            "cpu_s": round(cpu, 1),
            "wall_s": round(wall, 1),
            "cores": cores,
            "share": round(cpu / max(wall * cores, 1e-9), 3),
        }
        machine = machine_cpu_seconds()
        if machine is not None and self.machine is not None:
            out["machine_cpu_s"] = round(machine - self.machine, 1)
            out["machine_share"] = round((machine - self.machine) / max(wall * machine_cores(), 1e-9), 3)
        return out


def supersede_untrained(store: TrajectoryStore, next_step: int) -> int:
    """Episodes of steps from `next_step` on were run before a stop (asynchronous GRPO runs up to
    `rl.max_staleness` steps ahead; an interrupted step's episodes too) and never trained on: the step runs again
    on resume, so they stop being final episodes (docs/design.md, "Final episodes") and no group is counted
    twice. Returns how many were final."""
    count = 0
    for episode in store.list_episodes():
        step = episode.metadata.get("step")
        if isinstance(step, int) and step >= next_step and episode.metadata.get("final") is not False:
            count += episode.outcome is not None
            reason = f"GRPO step {step} was not trained before the run stopped; --resume ran it again"
            store.update_episode(episode.id, metadata={**episode.metadata, "final": False, "superseded": reason})
    return count


def over_budget(ctx: RunContext, started: float) -> bool:
    seconds = ctx.config.rl.seconds
    return seconds is not None and time.monotonic() - started >= seconds


async def evaluate_during(env: StepEnv, state: RLState, policy: Path) -> EvalRecord:
    after = len(state.steps)
    return await evaluate(
        env.ctx, policy, env.ctx.run / "eval" / f"after-{after:06d}", env.provider, after, progress=env.progress
    )


@dataclass
class Collected:
    """A step's episodes, once all of them have ended; `started`: when the first began."""

    episodes: list[StepEpisode]
    task_ids: list[str]
    started: float


class Admission:
    """Paced admission (asynchronous GRPO): step s's episodes start once step s − K has been trained
    (K = `rl.max_staleness`), so at most K + 1 steps of episodes are in flight and the trainer waits only for the
    oldest. Slots freed by a step's finished episodes go to later steps while its stragglers run and while it
    trains; no episode is abandoned for being slow, so long episodes are not starved (a group is dropped only if
    a policy more than K versions old sampled it, `GRPOTrainer.step`). K = 0: one step at a time, started after
    the step before it trained — synchronous GRPO. The steps' episodes share the `rl.concurrency` slots."""

    def __init__(self, env: StepEnv, state: RLState, started: float):
        self.env, self.state, self.started = env, state, started
        self.pending: dict[int, asyncio.Task[Collected | None]] = {}
        self.next = state.next_step
        self.slots = asyncio.Semaphore(env.ctx.config.rl.concurrency)

    def admit(self, training: int) -> None:
        """Start the steps up to `training` + K (within `rl.steps` and the `rl.seconds` budget)."""
        rl = self.env.ctx.config.rl
        while self.next < rl.steps and self.next <= training + rl.max_staleness:
            if self.next > training and over_budget(self.env.ctx, self.started):
                break  # no step ahead is started after the budget (the one the trainer waits for always is)
            self.pending[self.next] = asyncio.create_task(collect(self.env, self.state, self.next, self.slots))
            self.next += 1

    async def take(self, step: int) -> Collected | None:
        return await self.pending.pop(step)

    async def close(self) -> None:
        for task in self.pending.values():
            task.cancel()
        await asyncio.gather(*self.pending.values(), return_exceptions=True)
        self.pending.clear()


async def collect(env: StepEnv, state: RLState, step: int, slots: asyncio.Semaphore) -> Collected | None:
    """Step `step`'s episodes; None when they were interrupted."""
    started = time.monotonic()
    if env.ctx.config.in_process:
        episodes, task_ids = await family_step(env, step)
        return Collected(episodes, task_ids, started)
    ran, task_ids = await orchestrated_step(env, step, state.difficulty.dropped, slots)
    return None if ran is None else Collected(ran, task_ids, started)


async def rl_step(
    env: StepEnv, state: RLState, step: int, collected: Collected | None, started: float
) -> StepRecord | None:
    """Train on step `step`'s episodes; None when they were interrupted."""
    if collected is None:
        return None
    ctx, episodes, task_ids = env.ctx, collected.episodes, collected.task_ids
    last = state.steps[-1].elapsed_s + started if state.steps else 0.0
    t0 = max(collected.started, last)  # a step's wall time: from its episodes' start or the step before's end
    results = task_results(episodes)
    dropped = state.difficulty.observe(results)
    for task, why in dropped.items():
        ctx.console.print(f"task {task} dropped: {why} for {ctx.config.rl.drop_after} visit(s) in a row")
    idle = no_signal_cost(episodes)
    samples, metrics = assemble_run(env.proxy.store, episodes=[e.id for e in episodes], step=step)
    t_train = time.monotonic()
    # the policy this update starts from: the trainer's weights, pushed (asynchronous GRPO: maybe not yet served)
    result = await asyncio.to_thread(state.trainer.step, samples, env.pusher.version) if samples else None
    rl_path = rl_checkpoint(ctx)
    await env.pusher.settle()  # the push in flight has read the checkpoint written again here
    # in a thread: the proxy (on this loop) goes on serving the later steps' episodes meanwhile
    await asyncio.to_thread(
        save_checkpoint,
        state.model,
        ctx.model_path,
        rl_path,
        state.trainer.optimizer,
        state.trainer.step_count,
        extra={"rl_step": step + 1},
        merged=True,  # with LoRA: the engine loads the merged weights
    )
    # asynchronous GRPO does not wait for the swap (the engine drains its started generations meanwhile)
    version = await env.pusher.push(rl_path, wait=ctx.config.rl.max_staleness == 0)
    graded = [e.reward for e in episodes if e.reward is not None]
    return StepRecord(
        step=step,
        reward=sum(graded) / max(1, len(graded)),
        pass_rate=sum(r >= 1.0 for r in graded) / max(1, len(graded)),
        episodes=len(episodes),
        infrastructure_failures=len(episodes) - len(graded),
        harnesses=_count(e.harness for e in episodes),
        groups=result.groups_total if result else 0,
        groups_with_signal=result.groups_with_signal if result else 0,
        updated=bool(result and result.updated),
        loss=result.loss if result else 0.0,
        clip_fraction=result.clip_fraction if result else 0.0,
        tokens=metrics.training_tokens["merged"],
        trained_tokens=result.tokens if result else 0,
        merge_rate=metrics.merge_rate,
        policy_version=version,
        seconds=round(time.monotonic() - t0, 2),
        train_s=round(time.monotonic() - t_train, 2),
        elapsed_s=round(time.monotonic() - started, 2),
        tasks=task_ids,
        task_results=results,
        dropped_tasks=dropped,
        active_tasks=len(ctx.data.train_tasks) - len(state.difficulty.dropped) if ctx.config.tasks.dirs else None,
        no_signal_groups=idle.groups,
        no_signal_episodes=idle.episodes,
        no_signal_seconds=idle.seconds,
        lora=ctx.config.lora is not None,
        staleness=result.staleness if result else {},
        stale_groups_dropped=result.stale_groups_dropped if result else 0,
        behaviour_ratio_mean=result.behaviour_ratio_mean if result else 0.0,
        behaviour_ratio_max=result.behaviour_ratio_max if result else 0.0,
        behaviour_ratio_truncated=result.behaviour_ratio_truncated if result else 0.0,
        episode_seconds_mean=round(sum(e.seconds for e in episodes) / max(1, len(episodes)), 3),
    )


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


async def family_step(env: StepEnv, step: int) -> tuple[list[StepEpisode], list[str]]:
    """Fresh generated instances with the react harness, in this process (fast path)."""
    c = env.ctx.config
    instances = step_instances(env.ctx.data, step)
    episodes = await run_family_episodes(
        env.proxy, instances, samples=c.rl.group, step=step, react=c.react(), fault_spec=c.rl_faults
    )
    store = env.proxy.store
    return [
        StepEpisode(
            e.episode_id, e.reward, "react", e.instance.task_id(), episode_seconds(stored_episode(store, e.episode_id))
        )
        for e in episodes
    ], [i.task_id() for i in instances]


async def orchestrated_step(
    env: StepEnv, step: int, dropped: dict[str, str], slots: asyncio.Semaphore | None = None
) -> tuple[list[StepEpisode] | None, list[str]]:
    """Real episodes in sandboxes, through the orchestrator's episode runner, against the stage's proxy; tasks
    `dropped` by the difficulty tracker are not drawn."""
    ctx = env.ctx
    assert env.provider is not None
    tasks = step_tasks(ctx.data, ctx.config, ctx.run, step, dropped)
    summary = await run_slots(
        env.proxy,
        env.provider,
        rollout_config(ctx, step=step, faults=ctx.config.rl_faults),
        plan(tasks, ctx.config.harnesses, ctx.config.rl.group),
        run_label(ctx.run),
        ctx.console,
        progress=env.progress,
        limit=slots,
    )
    if summary.interrupted:
        return None, []
    final = [stored_episode(env.proxy.store, i) for i in summary.episode_ids]
    rows = [
        StepEpisode(
            e.id,
            None if e.outcome is None or e.outcome.is_infrastructure_failure else e.reward,
            e.harness or "",
            e.task or "",
            episode_seconds(e),
        )
        for e in final
    ]
    return rows, [t.id for t in tasks]


def summary_line(r: StepRecord) -> str:
    line = (
        f"step {r.step}: reward {r.reward:.2f}, pass {100 * r.pass_rate:.0f}%, "
        f"signal {r.groups_with_signal}/{r.groups} (no signal: {r.no_signal_episodes} episodes, "
        f"{r.no_signal_seconds:.0f} s), tokens {r.tokens} ({r.trained_tokens} trained), "
        f"merge {100 * r.merge_rate:.0f}%, policy v{r.policy_version}, {r.seconds:.1f}s"
    )
    if r.dropped_tasks:
        line += f", dropped {', '.join(f'{t} ({why})' for t, why in r.dropped_tasks.items())}"
    return line
