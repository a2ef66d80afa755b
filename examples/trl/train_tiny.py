"""TRL's GRPO trainer on the tiny model, with OpenForge's episodes as its rollouts: react in sandboxes, CPU.

1. An SFT checkpoint (a random-init policy earns no reward): the quickstart's pipeline up to SFT — the tiny
   model, the oracle teacher's demonstrations through react in sandboxes, 800 SFT steps — and the SFT policy's
   greedy held-out pass@1 (in RUN/sft; a second run reuses the checkpoint; `--sft DIR` starts from another).
2. A pool GRPO can learn from: `--candidates` fresh generated training tasks, each sampled `--screen` times
   from the SFT policy (`OpenForgeRollout.pass_rates`); the pool is up to `--pool` of those it solves sometimes
   but not always (`learnable_pool`) — a group whose episodes all pass or all fail has no advantage.
3. GRPO with TRL 1.16 (`GRPOTrainer(rollout_func=OpenForgeRollout(...))`), each step every pool task × a group
   of `--group` episodes, each episode in its own sandbox (Docker when a daemon can be started, else the
   local sandbox; `--sandbox`) through the orchestrator, graded by the task's verifier; the trainer's weights
   are pushed into the proxy's embedded engine before each batch. Stops after `--seconds` (or `--steps`).
4. RUN/report.json: the screening, each step's training reward (mean over the step's graded episodes), pass
   rate, TRL's loss, the policy version the episodes sampled, wall times; and the reward's rise (mean of the
   last third of the steps minus the first third's, and a least-squares slope per step).

    python examples/trl/train_tiny.py [--run runs/trl-tiny] [--seconds 150] [--seed 0] [--sandbox auto]

Measured: docs/trl.md, benchmarks/results/trl-tiny.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL 1.16: known here

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from openforge.integrations.trl import OpenForgeRollout, learnable_pool, openforge_reward, task_dataset  # noqa: E402
from openforge.rollout import RolloutConfig  # noqa: E402
from openforge.tasks import QUICKSTART_FAMILIES, InstanceSampler  # noqa: E402
from openforge.tasks.images import DEFAULT_IMAGE_MAP  # noqa: E402
from openforge.train.data import RL_SEED, write_instances  # noqa: E402
from openforge.train.pipeline import run_training  # noqa: E402
from openforge.train.quickstart import QUICKSTART, quickstart_config  # noqa: E402
from openforge.train.sft_stage import SFT_DIR  # noqa: E402


def sft_checkpoint(run: Path, seed: int, sandbox: str) -> tuple[Path, float | None]:
    """The quickstart's SFT policy (teacher + SFT, no GRPO) and its greedy held-out pass@1."""
    config = quickstart_config(
        {
            "run": str(run),
            "sandbox": sandbox,
            # the quickstart's families, which `openforge quickstart` checks against the reward hacks
            "validate_tasks": False,
            "rl": {"steps": 0, "eval_instances": 100},
            "evaluation": "curve",  # with no GRPO step: the SFT policy's held-out pass@1
        },
        seed=seed,
    )
    # an SFT checkpoint already in `run` is reused (the teacher and SFT are not run again)
    report = run_training(config, run, title="SFT for the TRL example")
    pass_at_1 = report.get("final_heldout_pass_at_1")  # the curve's one point: before any GRPO step
    return run / "checkpoints" / SFT_DIR, float(pass_at_1) if isinstance(pass_at_1, (int, float)) else None


class Budget(TrainerCallback):
    """Stop starting steps after `seconds`."""

    def __init__(self, seconds: float):
        self.seconds, self.started = seconds, time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001 - TrainerCallback's signature
        if time.monotonic() - self.started >= self.seconds:
            control.should_training_stop = True


def rise(rewards: list[float]) -> dict[str, float | None]:
    """Mean of the last third minus the first third's, and the least-squares slope per step."""
    n = len(rewards)
    if n < 3:
        return {"first_third": None, "last_third": None, "rise": None, "slope_per_step": None}
    k = n // 3
    first, last = sum(rewards[:k]) / k, sum(rewards[-k:]) / k
    mean_x, mean_y = (n - 1) / 2, sum(rewards) / n
    slope = sum((i - mean_x) * (r - mean_y) for i, r in enumerate(rewards)) / sum((i - mean_x) ** 2 for i in range(n))
    return {"first_third": first, "last_third": last, "rise": last - first, "slope_per_step": slope}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=Path("runs/trl-tiny"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=150.0, help="TRL's GRPO wall-clock budget")
    parser.add_argument("--steps", type=int, default=40, help="at most this many GRPO steps")
    parser.add_argument("--sft", type=Path, help="start from this SFT checkpoint (skips the teacher and SFT)")
    parser.add_argument("--candidates", type=int, default=24, help="fresh training tasks screened for the pool")
    parser.add_argument("--screen", type=int, default=4, help="episodes per candidate task in the screening")
    parser.add_argument("--pool", type=int, default=4, help="at most this many screened tasks, revisited each step")
    parser.add_argument(
        "--families",
        default="copy_file,count_lines,replace_word",
        help="the candidates' task families (default: those the SFT policy solves at times)",
    )
    parser.add_argument(
        "--sandbox",
        default="auto",
        choices=["auto", "docker", "local"],
        help="where episodes run (auto: Docker when a daemon can be started, else the local sandbox)",
    )
    parser.add_argument("--group", type=int, default=8, help="episodes per task (num_generations)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling (and TRL's scoring) temperature")
    parser.add_argument("--lr", type=float, default=2e-4, help="1e-3 made the tiny model collapse within 3 steps")
    args = parser.parse_args()
    run = args.run.resolve()
    started = time.monotonic()

    if args.sft is not None:
        sft, sft_pass = args.sft.resolve(), None
    else:
        sft, sft_pass = sft_checkpoint(run / "sft", args.seed, args.sandbox)
    sft_s = time.monotonic() - started

    # candidates: fresh training instances (never the teacher's, never held out), written as task directories;
    # GRPO starts over
    for stale in (run / "tasks", run / "trl"):
        shutil.rmtree(stale, ignore_errors=True)
    families = args.families.split(",")
    unknown = sorted(set(families) - set(QUICKSTART_FAMILIES))
    if unknown:
        parser.error(f"--families: {unknown} are not the quickstart's ({', '.join(QUICKSTART_FAMILIES)})")
    candidates = InstanceSampler("train", seed=RL_SEED + args.seed, families=families).sample(args.candidates)
    write_instances(candidates, run / "tasks")
    config = RolloutConfig(
        tasks=[run / "tasks"],
        harnesses=["react"],
        harness_options=QUICKSTART["harness_options"],
        max_new_tokens=QUICKSTART["max_new_tokens"],
        sandbox=args.sandbox,
        image_map=DEFAULT_IMAGE_MAP,  # generated tasks are FROM debian:bookworm-slim: the offline base image
        model=sft,
        backend="embedded",
        run=run / "trl",
        concurrency=8,
        warm_sandboxes=8,
    )
    with OpenForgeRollout(config) as rollout:
        screen_started = time.monotonic()
        ids = [i.task_id() for i in candidates]
        rates = rollout.pass_rates(ids, args.screen, temperature=args.temperature)
        pool = learnable_pool(rates, args.pool)
        screen_s = time.monotonic() - screen_started
        if not pool:
            print(f"no candidate task is solved at times by the starting policy ({rates}): nothing for GRPO to learn")
            return 1
        print(f"pool: {len(pool)} of {len(ids)} candidates pass sometimes: {[round(rates[t], 2) for t in pool]}")
        grpo = GRPOConfig(
            output_dir=str(run / "trl" / "trainer"),
            per_device_train_batch_size=len(pool) * args.group,  # each step: every pool task, a group each
            num_generations=args.group,
            max_steps=args.steps,
            learning_rate=args.lr,
            lr_scheduler_type="constant",
            temperature=args.temperature,
            bf16=False,  # the engine samples in float32; TRL's default autocasts to bf16, on CPU too
            use_cpu=True,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            seed=args.seed,
        )
        grpo_started = time.monotonic()
        trainer = GRPOTrainer(
            model=str(sft),
            reward_funcs=openforge_reward,
            args=grpo,
            train_dataset=task_dataset(pool),
            rollout_func=rollout,
            callbacks=[Budget(args.seconds)],
        )
        trainer.train()
        history = list(rollout.history)
    grpo_s = time.monotonic() - grpo_started

    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e and "train_loss" not in e]
    steps = [
        {
            "step": s.step,
            "reward": s.reward,
            "pass_rate": s.pass_rate,
            "episodes": s.episodes,
            "infrastructure_failures": s.infrastructure_failures,
            "broken_episodes": s.broken_episodes,
            "trained_tokens": s.trained_tokens,
            "policy_version": s.policy_version,
            "loss": float(losses[i]) if i < len(losses) else None,
            "rollout_s": s.seconds,
        }
        for i, s in enumerate(history)
    ]
    rewards = [s["reward"] for s in steps if s["reward"] is not None]
    report = {
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "seed": args.seed,
        "sft_heldout_pass_at_1": sft_pass,
        "screening": {
            "candidates": len(candidates),
            "episodes_per_task": args.screen,
            "pass_rates": rates,
            "pool": {t: rates[t] for t in pool},
        },
        "grpo": {
            "pool": len(pool),
            "families": families,
            "group": args.group,
            "lr": args.lr,
            "temperature": args.temperature,
            "steps": len(steps),
        },
        "steps": steps,
        "reward": rise(rewards),
        "wall_s": {
            "sft": round(sft_s, 1),
            "screening": round(screen_s, 1),
            "grpo": round(grpo_s, 1),
            "total": round(time.monotonic() - started, 1),
        },
    }
    (run / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print("step  reward  pass   loss     policy  rollout_s")
    for s in steps:
        reward = f"{s['reward']:.3f}" if s["reward"] is not None else "  -  "
        loss = f"{s['loss']:+.4f}" if s["loss"] is not None else "   -   "
        print(
            f"{s['step']:>4}  {reward}  {s['pass_rate'] or 0:.2f}  {loss}  v{s['policy_version']:<5}  {s['rollout_s']}"
        )
    r = report["reward"]
    if r["rise"] is not None:
        print(
            f"training reward: first third {r['first_third']:.3f} -> last third {r['last_third']:.3f} "
            f"(rise {r['rise']:+.3f}, slope {r['slope_per_step']:+.4f}/step)"
        )
    print(f"SFT held-out pass@1 {sft_pass}; wall {report['wall_s']}; report {run / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
