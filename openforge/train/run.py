"""`openforge train --config FILE`: SFT (optional) and GRPO through the real harnesses, with a report.

1. the model: a model directory, or `tiny` (built into RUN/model);
2. SFT (when `sft:` is given): the teacher's episodes recorded through the proxy and the run's harnesses in
   sandboxes (RUN/teacher), SFT on its successful ones, checkpoint RUN/checkpoints/sft;
3. GRPO, against **one** proxy for the whole stage (RUN/rl): each step runs `prompts` tasks × harnesses ×
   `group` episodes — generated families with only `react` in process (`run_family_episodes`), everything else
   through the orchestrator's episode runner in sandboxes —, assembles the step's episodes (GRPO groups are
   (step, task, harness)), updates the policy, saves RUN/checkpoints/rl, pushes the weights into the proxy
   (the policy version increments) and appends a record to RUN/steps.jsonl;
4. greedy held-out pass@1 before the first step, every `eval_every` steps and after the last (RUN/evals.jsonl);
5. RUN/report.json, report.md and report.png (reward per step, held-out pass@1 per evaluation).

`--resume` continues from RUN/checkpoints/rl (weights, optimizer, RNG, step) and RUN/steps.jsonl.
Policy versions count weight pushes within one process: a resumed run's proxy serves the checkpoint as
version 0 again.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from openforge.core.runlock import RunDirBusy, locked_run_dir
from openforge.train.config import TrainConfig

STEPS_FILE = "steps.jsonl"
EVALS_FILE = "evals.jsonl"


class TrainError(RuntimeError):
    """The run cannot start or go on; the message says what to do."""


@dataclass
class Data:
    """The run's tasks: generated instances (families) and/or task directories (`Task`s)."""

    train_tasks: list = field(default_factory=list)  # dirs: the train split
    heldout_tasks: list = field(default_factory=list)  # dirs, or families written as tasks (orchestrator path)
    heldout_instances: list = field(default_factory=list)  # families
    trained_instances: list = field(default_factory=list)  # families: every instance trained on, this process


@dataclass
class Ctx:
    config: TrainConfig
    run: Path
    model_path: Path
    console: Console
    data: Data
    timings: dict[str, float] = field(default_factory=dict)
    sft: dict[str, Any] | None = None


# ---- entry point -------------------------------------------------------------------------------------------

def run_training(config: TrainConfig, run_dir: Path | None = None, resume: bool = False,
                 console: Console | None = None) -> dict[str, Any]:
    """The whole run (SFT if configured, GRPO, report); TrainError if another process holds the run directory."""
    run = Path(run_dir or config.run).resolve()
    try:
        with locked_run_dir(run):
            return _run_training(config, run, resume, console or Console())
    except RunDirBusy as e:
        raise TrainError(str(e)) from None


def _run_training(config: TrainConfig, run: Path, resume: bool, console: Console) -> dict[str, Any]:
    from openforge.quickstart import Phase

    config = config.model_copy(update={"run": run})
    _check_run_dir(run, resume)
    (run / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    timings: dict[str, float] = {}
    with Phase("model", console, timings):
        model_path = prepare_model(config, run, console)
    ctx = Ctx(config, run, model_path, console, load_data(config, run), timings)
    start = model_path
    if config.sft is not None:
        with Phase("SFT", console, timings):
            start = sft_stage(ctx)
    with Phase("GRPO", console, timings):
        steps, evals = asyncio.run(rl_stage(ctx, start, resume))
    check_disjoint(ctx, steps)
    report = build_report(ctx, steps, evals)
    write_report(run, report, console)
    return report


def _check_run_dir(run: Path, resume: bool) -> None:
    done = read_jsonl(run / STEPS_FILE)
    if done and not resume:
        raise TrainError(f"{run} already holds {len(done)} RL step(s): pass --resume to continue that run, or "
                         "choose a new --run directory")


def prepare_model(config: TrainConfig, run: Path, console: Console) -> Path:
    from openforge.models import ModelDir, build_tiny_model

    if config.model != "tiny":
        path = Path(config.model).resolve()
    else:
        path = run / "model"
        if not (path / "model.safetensors").is_file():
            build_tiny_model(path, seed=config.seed)
    console.print(f"model {path} (vocab {ModelDir(path).vocab_size})")
    return path


def load_data(config: TrainConfig, run: Path) -> Data:
    from openforge.tasks import TaskLoadError, load_tasks
    from openforge.tasks.generator import InstanceSampler

    rl = config.rl
    if config.tasks.families is not None:
        heldout = InstanceSampler("heldout", seed=10_000 + config.seed,
                                  families=config.tasks.families).sample(rl.eval_instances)
        data = Data(heldout_instances=heldout)
        if not config.in_process:
            data.heldout_tasks = write_instances(heldout, run / "tasks" / "heldout")
        return data
    try:
        train = load_tasks(config.tasks.dirs, split="train")
        heldout = load_tasks(config.tasks.dirs, split="heldout")
    except TaskLoadError as e:
        raise TrainError(f"tasks.dirs: {e}") from None
    if not train:
        raise TrainError(f"tasks.dirs: no task of the train split in {', '.join(map(str, config.tasks.dirs))} (a "
                         "task's split comes from `split` in task.toml or a train/ or heldout/ parent directory)")
    return Data(train_tasks=train, heldout_tasks=heldout[:rl.eval_instances])


def write_instances(instances, root: Path) -> list:
    """Generated instances as Harbor task directories (for the orchestrator), loaded back as `Task`s."""
    from openforge.tasks import load_tasks
    from openforge.tasks.generator import write_task

    for instance in instances:
        if not (root / instance.task_id()).is_dir():
            write_task(instance, root / instance.task_id())
    return load_tasks(root)


# ---- settings shared by every stage ------------------------------------------------------------------------

def harness_options(config: TrainConfig) -> dict[str, dict[str, Any]]:
    """The configured options; react's per-call token limit defaults to `rl.max_new_tokens`."""
    options = {k: dict(v) for k, v in config.harness_options.items()}
    options.setdefault("react", {}).setdefault("max_tokens", config.rl.max_new_tokens)
    return options


def rollout_config(ctx: Ctx, **overrides):
    from openforge.rollout import RolloutConfig

    c = ctx.config
    fields = {"tasks": list(c.tasks.dirs or [ctx.run / "tasks"]), "harnesses": c.harnesses, "sandbox": c.sandbox,
              "sandbox_options": c.sandbox_options, "model": ctx.model_path, "backend": "embedded",
              "run": ctx.run / "rl", "image_map": c.image_map, "harness_options": harness_options(c),
              "max_new_tokens": c.rl.max_new_tokens, "concurrency": c.rl.concurrency,
              "max_attempts": c.max_attempts, "proxy_listen": c.proxy_listen}
    return RolloutConfig(**{**fields, **overrides})


def proxy_config(ctx: Ctx, model: Path, run: Path, temperature: float, socket_dir: Path, policy_version: int = 0):
    from openforge.proxy.server import ProxyConfig

    return ProxyConfig(model=model, backend="embedded", run=run, listen=ctx.config.proxy_listen,
                       uds=socket_dir / "model.sock", admin_listen="127.0.0.1:0", temperature=temperature,
                       max_new_tokens=ctx.config.rl.max_new_tokens,
                       backend_options={"seed": ctx.config.seed, "max_batch": 128, "prefix_cache_entries": 512,
                                        "policy_version": policy_version})


@asynccontextmanager
async def serving(ctx: Ctx, model: Path, run: Path, temperature: float, policy_version: int = 0):
    """A proxy serving `model` with the embedded backend (TCP for in-process episodes, a Unix socket for
    sandboxes; a short socket path: AF_UNIX allows ~107 bytes). `policy_version`: the version `model` is."""
    from openforge.proxy.server import running_proxy

    socket_dir = Path(tempfile.mkdtemp(prefix="openforge-train-"))
    try:
        async with running_proxy(proxy_config(ctx, model, run, temperature, socket_dir, policy_version)) as proxy:
            yield proxy
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


# ---- SFT ---------------------------------------------------------------------------------------------------

def sft_stage(ctx: Ctx) -> Path:
    from openforge.models import ModelDir
    from openforge.quickstart import _progress
    from openforge.train.assemble import assemble_run
    from openforge.train.checkpoint import save_checkpoint
    from openforge.train.sft import SFTConfig, SFTTrainer

    settings, console = ctx.config.sft, ctx.console
    out = ctx.run / "checkpoints" / "sft"
    if (out / "model.safetensors").is_file():
        console.print(f"SFT checkpoint {out} exists: reusing it")
        ctx.sft = json.loads((out / "trainer_state.json").read_text()).get("extra") or {}
        return out
    record_teacher(ctx)
    samples, metrics = assemble_run(ctx.run / "teacher")
    demos = [s for s in samples if s.reward >= 1.0]
    if not demos:
        raise TrainError(f"the teacher ({settings.teacher}) solved no training task: nothing to SFT on; see "
                         f"{ctx.run / 'teacher'} (`openforge export` lists its calls), or drop the `sft:` block")
    model_dir = ModelDir(ctx.model_path)
    model = model_dir.load_model()
    trainer = SFTTrainer(model, SFTConfig(lr=settings.lr, batch_size=settings.batch_size, steps=settings.steps,
                                          warmup_steps=settings.warmup_steps, schedule=settings.schedule,
                                          seed=ctx.config.seed), pad_id=model_dir.pad_token_id)
    with _progress(console) as progress:
        bar = progress.add_task("SFT", total=settings.steps, info="")
        trainer.train(demos, on_step=lambda step, loss: progress.update(bar, advance=1, info=f"loss {loss:.3f}"))
    ctx.sft = {"samples": len(demos), "teacher_samples": len(samples), "steps": trainer.step_count,
               "first_loss": trainer.losses[0], "last_loss": trainer.losses[-1],
               "trained_tokens": metrics.training_tokens["merged"]}
    save_checkpoint(model, ctx.model_path, out, trainer.optimizer, trainer.step_count, extra=ctx.sft)
    console.print(f"SFT on {len(demos)} successful teacher samples: loss {trainer.losses[0]:.3f} → "
                  f"{trainer.losses[-1]:.3f}")
    return out


def record_teacher(ctx: Ctx) -> None:
    """The teacher's episodes through the proxy and the run's harnesses, one sandbox each (resumable)."""
    from openforge.rollout import run_rollouts
    from openforge.tasks.generator import InstanceSampler

    c, settings = ctx.config, ctx.config.sft
    teacher_run = ctx.run / "teacher"
    if c.tasks.families is not None:
        instances = InstanceSampler("train", seed=c.seed, families=c.tasks.families).sample(settings.demos)
        ctx.data.trained_instances += instances
        write_instances(instances, ctx.run / "tasks" / "teacher")
        tasks, samples, split = [ctx.run / "tasks" / "teacher"], 1, None
    else:
        tasks, samples, split = list(c.tasks.dirs), settings.demos, "train"
    config = rollout_config(ctx, tasks=tasks, samples=samples, split=split, backend=settings.teacher,
                            model=settings.teacher_model or ctx.model_path, run=teacher_run,
                            resume=(teacher_run / "trajectories.db").exists())
    summary = asyncio.run(run_rollouts(config, ctx.console))
    if summary.interrupted:
        raise TrainError("interrupted while recording the teacher: continue with --resume")


# ---- GRPO --------------------------------------------------------------------------------------------------

@dataclass
class RLState:
    model: Any
    trainer: Any
    serve: Path  # what the proxy serves first
    next_step: int
    steps: list[dict[str, Any]]
    evals: list[dict[str, Any]]


def restore_or_start(ctx: Ctx, start: Path, resume: bool) -> RLState:
    from openforge.models import ModelDir
    from openforge.train.checkpoint import load_checkpoint, read_trainer_state
    from openforge.train.grpo import GRPOConfig, GRPOTrainer

    rl, rl_path = ctx.config.rl, ctx.run / "checkpoints" / "rl"
    pad = ModelDir(ctx.model_path).pad_token_id
    grpo = GRPOConfig(lr=rl.lr, temperature=rl.temperature)
    if resume and (rl_path / "model.safetensors").is_file():
        model, optimizer_state, count = load_checkpoint(rl_path)
        trainer = GRPOTrainer(model, grpo, pad_id=pad, step_count=count)
        if optimizer_state is not None:
            trainer.optimizer.load_state_dict(optimizer_state)
        next_step = int(read_trainer_state(rl_path).extra.get("rl_step", 0))
        serve = rl_path
        ctx.console.print(f"resuming after RL step {next_step - 1} from {rl_path}")
    else:
        model = ModelDir(start).load_model()
        trainer, next_step, serve = GRPOTrainer(model, grpo, pad_id=pad), 0, start
    # records past the checkpoint (a crash between the two writes) are dropped: those steps run again
    steps = [r for r in read_jsonl(ctx.run / STEPS_FILE) if r["step"] < next_step]
    evals = [r for r in read_jsonl(ctx.run / EVALS_FILE) if r["after_steps"] <= next_step]
    write_jsonl(ctx.run / STEPS_FILE, steps)
    write_jsonl(ctx.run / EVALS_FILE, evals)
    return RLState(model, trainer, serve, next_step, steps, evals)


async def rl_stage(ctx: Ctx, start: Path, resume: bool) -> tuple[list[dict], list[dict]]:
    from openforge.quickstart import _progress
    from openforge.rollout.orchestrator import run_label
    from openforge.sandbox import get_provider

    c, console = ctx.config, ctx.console
    state = restore_or_start(ctx, start, resume)
    provider = None if c.in_process else get_provider(c.sandbox, **c.sandbox_options)
    label = run_label(ctx.run)
    budget_used = state.steps[-1]["elapsed_s"] if state.steps else 0.0
    started = time.monotonic() - budget_used
    try:
        if provider is not None:
            await provider.cleanup(label)
        # a resumed run goes on counting policy versions from its last pushed weights
        version = state.steps[-1]["policy_version"] if state.steps else 0
        async with serving(ctx, state.serve, ctx.run / "rl", c.rl.temperature, policy_version=version) as proxy:
            proxy.store.set_run_info({"train": c.model_dump(mode="json")})
            with _progress(console) as progress:
                bar = progress.add_task("GRPO", total=c.rl.steps, completed=state.next_step, info="")
                env = StepEnv(ctx, proxy, provider, label, progress)
                if not state.evals:
                    await evaluate_now(env, state, state.serve)
                step = state.next_step
                while step < c.rl.steps and not over_budget(c, started):
                    record = await rl_step(env, state, step, started)
                    if record is None:  # interrupted: the step is not trained on
                        console.print("[yellow]interrupted[/]: continue with --resume")
                        break
                    state.steps.append(record)
                    append_jsonl(ctx.run / STEPS_FILE, record)
                    progress.update(bar, completed=step + 1, info=summary_line(record))
                    console.print(summary_line(record))
                    step += 1
                    if step % c.rl.eval_every == 0:
                        await evaluate_now(env, state, ctx.run / "checkpoints" / "rl")
                if state.steps and state.evals[-1]["after_steps"] != len(state.steps):
                    await evaluate_now(env, state, ctx.run / "checkpoints" / "rl")
    finally:
        if provider is not None:
            try:
                await asyncio.shield(provider.cleanup(label))
            finally:
                await provider.close()
    return state.steps, state.evals


def over_budget(config: TrainConfig, started: float) -> bool:
    return config.rl.seconds is not None and time.monotonic() - started >= config.rl.seconds


@dataclass
class StepEnv:
    ctx: Ctx
    proxy: Any
    provider: Any
    label: str
    progress: Any


async def rl_step(env: StepEnv, state: RLState, step: int, started: float) -> dict[str, Any] | None:
    from openforge.train.assemble import assemble_run
    from openforge.train.checkpoint import save_checkpoint
    from openforge.train.weights_sync import push_weights_in_process

    ctx, t0 = env.ctx, time.monotonic()
    if ctx.config.in_process:
        episodes, task_ids = await family_step(env, step)
    else:
        episodes, task_ids = await orchestrated_step(env, step)
        if episodes is None:
            return None
    samples, metrics = assemble_run(env.proxy.store, episodes=[e["id"] for e in episodes], step=step)
    result = await asyncio.to_thread(state.trainer.step, samples) if samples else None
    rl_path = ctx.run / "checkpoints" / "rl"
    save_checkpoint(state.model, ctx.model_path, rl_path, state.trainer.optimizer, state.trainer.step_count,
                    extra={"rl_step": step + 1})
    version = await push_weights_in_process(env.proxy, rl_path)
    graded = [e for e in episodes if e["reward"] is not None]
    return {
        "step": step,
        "reward": sum(e["reward"] for e in graded) / max(1, len(graded)),
        "pass_rate": sum(e["reward"] >= 1.0 for e in graded) / max(1, len(graded)),
        "episodes": len(episodes),
        "infrastructure_failures": len(episodes) - len(graded),
        "harnesses": _count(e["harness"] for e in episodes),
        "groups": result.groups_total if result else 0,
        "groups_with_signal": result.groups_with_signal if result else 0,
        "updated": bool(result and result.updated),
        "loss": result.loss if result else 0.0,
        "tokens": metrics.training_tokens["merged"],  # sampled tokens of the step's samples
        "trained_tokens": result.tokens if result else 0,  # of those, in groups with signal
        "merge_rate": metrics.merge_rate,
        "policy_version": version,
        "seconds": round(time.monotonic() - t0, 2),
        "elapsed_s": round(time.monotonic() - started, 2),
        "tasks": task_ids,
    }


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def step_instances(config: TrainConfig, step: int):
    """Fresh training instances for `step` (deterministic in seed and step, so a resumed run draws the same)."""
    from openforge.tasks.generator import InstanceSampler

    seed = 20_000 + 1_000_003 * config.seed + step
    return InstanceSampler("train", seed=seed, families=config.tasks.families).sample(config.rl.prompts)


def step_tasks(ctx: Ctx, step: int) -> list:
    """The step's training tasks: fresh instances written as task directories, or a draw of the train split."""
    if ctx.config.tasks.families is not None:
        instances = step_instances(ctx.config, step)
        ctx.data.trained_instances += instances
        return write_instances(instances, ctx.run / "tasks" / "rl" / f"step-{step:06d}")
    tasks = ctx.data.train_tasks
    rng = random.Random(f"{ctx.config.seed}:{step}")
    return rng.sample(tasks, min(ctx.config.rl.prompts, len(tasks)))


async def family_step(env: StepEnv, step: int) -> tuple[list[dict], list[str]]:
    """Generated instances with the react harness, in this process (fast path)."""
    from openforge.rollout.family import run_family_episodes

    c = env.ctx.config
    instances = step_instances(c, step)
    env.ctx.data.trained_instances += instances
    episodes = await run_family_episodes(env.proxy, instances, samples=c.rl.group, step=step, **react_options(c))
    rows = [{"id": e.episode_id, "reward": e.reward, "harness": "react"} for e in episodes]
    return rows, [i.task_id() for i in instances]


async def orchestrated_step(env: StepEnv, step: int) -> tuple[list[dict] | None, list[str]]:
    """Real episodes in sandboxes, through the orchestrator's episode runner, against the stage's proxy."""
    from openforge.rollout.orchestrator import plan, run_slots

    tasks = step_tasks(env.ctx, step)
    store = env.proxy.store
    before = {e.id for e in store.list_episodes()}
    config = rollout_config(env.ctx, step=step)
    summary = await run_slots(env.proxy, env.provider, config, plan(tasks, env.ctx.config.harnesses,
                                                                      env.ctx.config.rl.group),
                              env.label, env.ctx.console, progress=env.progress)
    if summary.interrupted:
        return None, []
    final = [e for e in store.list_episodes() if e.id not in before and e.metadata.get("final")]
    rows = [{"id": e.id, "reward": e.reward if not e.outcome.is_infrastructure_failure else None,
             "harness": e.harness} for e in final]
    return rows, [t.id for t in tasks]


def summary_line(r: dict[str, Any]) -> str:
    return (f"step {r['step']}: reward {r['reward']:.2f}, pass {100 * r['pass_rate']:.0f}%, "
            f"signal {r['groups_with_signal']}/{r['groups']}, tokens {r['tokens']}, "
            f"merge {100 * r['merge_rate']:.0f}%, policy v{r['policy_version']}, {r['seconds']:.1f}s")


# ---- held-out evaluation -----------------------------------------------------------------------------------

async def evaluate_now(env: StepEnv, state: RLState, policy: Path) -> None:
    """Greedy (temperature 0) held-out pass@1 of `policy`, served by its own proxy."""
    ctx = env.ctx
    after = len(state.steps)
    run = ctx.run / "eval" / f"after-{after:06d}"
    shutil.rmtree(run, ignore_errors=True)  # a crashed earlier attempt: start clean
    if ctx.config.in_process:
        score, graded = await family_eval(ctx, policy, run)
    elif ctx.data.heldout_tasks:
        score, graded = await task_eval(env, policy, run, after)
    else:
        ctx.console.print("[yellow]no held-out tasks (split heldout): pass@1 not measured[/]")
        score, graded = None, 0
    record = {"after_steps": after, "pass_at_1": score, "graded": graded, "policy": str(policy)}
    state.evals.append(record)
    append_jsonl(ctx.run / EVALS_FILE, record)
    if score is not None:
        ctx.console.print(f"held-out pass@1 after {after} step(s): [bold]{100 * score:.1f}%[/] ({graded} graded)")


async def family_eval(ctx: Ctx, policy: Path, run: Path) -> tuple[float, int]:
    """Held-out instances, the react harness in process, greedy (as quickstart's `evaluate`)."""
    from openforge.rollout.family import pass_at_1

    async with serving(ctx, policy, run, 0.0) as proxy:
        return await pass_at_1(proxy, ctx.data.heldout_instances, **react_options(ctx.config))


def react_options(c: TrainConfig) -> dict[str, Any]:
    """The run's react options as the in-process episodes take them."""
    return {"max_steps": c.react_option("max_steps", 1),
            "max_tokens": c.react_option("max_tokens", c.rl.max_new_tokens),
            "tools": c.react_option("tools", None), "system_prompt": c.react_option("system_prompt", None)}


async def task_eval(env: StepEnv, policy: Path, run: Path, after: int) -> tuple[float | None, int]:
    """Held-out tasks × harnesses, one episode each, through the orchestrator; infrastructure failures are
    left out of pass@1 (never counted as 0)."""
    from openforge.rollout.orchestrator import plan, run_slots

    ctx = env.ctx
    async with serving(ctx, policy, run, 0.0) as proxy:
        config = rollout_config(ctx, run=run, step=after, temperature=0.0)
        await run_slots(proxy, env.provider, config, plan(ctx.data.heldout_tasks, ctx.config.harnesses, 1),
                        env.label, ctx.console, progress=env.progress)
        final = [e for e in proxy.store.list_episodes() if e.metadata.get("final")]
    graded = [e for e in final if not e.outcome.is_infrastructure_failure and e.reward is not None]
    if not graded:
        return None, 0
    return sum(e.reward >= 1.0 for e in graded) / len(graded), len(graded)


def check_disjoint(ctx: Ctx, steps: list[dict]) -> None:
    from openforge.tasks.generator import check_split_disjoint

    heldout_ids = {t.id for t in ctx.data.heldout_tasks} | {i.task_id() for i in ctx.data.heldout_instances}
    trained = {t for s in steps for t in s["tasks"]}
    problems = [f"held-out task {t} trained on" for t in sorted(heldout_ids & trained)]
    if ctx.data.heldout_instances:
        problems += check_split_disjoint(ctx.data.trained_instances, ctx.data.heldout_instances)
    if problems:
        raise TrainError("held-out data appeared in training: " + "; ".join(problems[:3]))


# ---- report ------------------------------------------------------------------------------------------------

def build_report(ctx: Ctx, steps: list[dict], evals: list[dict]) -> dict[str, Any]:
    heldout = [t.id for t in ctx.data.heldout_tasks] or [i.task_id() for i in ctx.data.heldout_instances]
    scored = [e for e in evals if e["pass_at_1"] is not None]
    return {
        "run": str(ctx.run),
        "model": str(ctx.model_path),
        "harnesses": ctx.config.harnesses,
        "episode_path": "in-process" if ctx.config.in_process else "orchestrator",
        "rl_steps": len(steps),
        "final_heldout_pass_at_1": scored[-1]["pass_at_1"] if scored else None,
        "heldout_pass_at_1": [{"after_steps": e["after_steps"], "pass_at_1": e["pass_at_1"]} for e in evals],
        "heldout_task_ids": heldout,
        "sft": ctx.sft,
        "steps": steps,
        "timings_s": ctx.timings,
        "config": ctx.config.model_dump(mode="json"),
    }


def write_report(run: Path, report: dict[str, Any], console: Console) -> None:
    (run / "report.json").write_text(json.dumps(report, indent=2, default=str))
    intro = (f"Model `{report['model']}`, harnesses {', '.join(report['harnesses'])} "
             f"({report['episode_path']} episodes), {report['rl_steps']} RL step(s).")
    lines = ["# Training report", "", intro, ""]
    if report["sft"]:
        s = report["sft"]
        lines += [(f"SFT: {s.get('samples')} teacher samples, {s.get('steps')} steps, loss "
                   f"{s.get('first_loss', 0):.3f} → {s.get('last_loss', 0):.3f}."), ""]
    lines += [f"Held-out pass@1 (greedy, {len(report['heldout_task_ids'])} held-out tasks/instances):", "",
              "| after step | pass@1 |", "|---|---|"]
    lines += [f"| {e['after_steps']} | {_pct(e['pass_at_1'])} |" for e in report["heldout_pass_at_1"]]
    lines += ["", "| step | reward | pass rate | signal | tokens | merge rate | policy | seconds |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['step']} | {r['reward']:.3f} | {_pct(r['pass_rate'])} | {r['groups_with_signal']}/{r['groups']} "
              f"| {r['tokens']} | {_pct(r['merge_rate'])} | {r['policy_version']} | {r['seconds']} |"
              for r in report["steps"]]
    lines += ["", "![reward and held-out pass@1](report.png)"]
    (run / "report.md").write_text("\n".join(lines) + "\n")
    plot(run / "report.png", report)
    console.print(f"final held-out pass@1: [bold]{_pct(report['final_heldout_pass_at_1'])}[/]")
    console.print(f"report: {run / 'report.md'}, {run / 'report.json'}, {run / 'report.png'}")


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def plot(path: Path, report: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    steps = report["steps"]
    left.plot([s["step"] for s in steps], [s["reward"] for s in steps], marker=".", label="mean reward")
    left.plot([s["step"] for s in steps], [s["pass_rate"] for s in steps], marker=".", alpha=0.6, label="pass rate")
    left.set_xlabel("RL step")
    left.set_ylim(-0.05, 1.05)
    left.set_title("training reward per step")
    left.legend()
    evals = [e for e in report["heldout_pass_at_1"] if e["pass_at_1"] is not None]
    right.plot([e["after_steps"] for e in evals], [100 * e["pass_at_1"] for e in evals], marker="o", color="#c63")
    right.set_xlabel("RL steps done")
    right.set_ylabel("held-out pass@1 (%)")
    right.set_ylim(-5, 105)
    right.set_title("held-out pass@1 (greedy)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---- JSON lines --------------------------------------------------------------------------------------------

def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    if path.is_file() or records:
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in records))


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record, default=str) + "\n")
