"""TRL's GRPO trainer on the tiny model, with OpenForge's episodes as its rollouts: react in the local sandbox, CPU.

1. An SFT checkpoint (a random-init policy earns no reward): the quickstart's pipeline up to SFT — the tiny
   model, the oracle teacher's demonstrations through react in sandboxes, 800 SFT steps — and the SFT policy's
   greedy held-out pass@1 (in RUN/sft; a second run reuses the checkpoint).
2. GRPO with TRL 1.16 (`GRPOTrainer(rollout_func=OpenForgeRollout(...))`) on a pool of `--pool` fresh generated
   training tasks, revisited epoch after epoch: each step `--prompts` tasks × a group of `--group` episodes, each
   episode in its own local sandbox through the orchestrator, graded by the task's verifier; the trainer's
   weights are pushed into the proxy's embedded engine before each batch. Stops after `--seconds` (or `--steps`).
3. RUN/report.json: each step's training reward (mean over the step's graded episodes), pass rate, TRL's loss,
   the policy version the episodes sampled, wall times; and the reward's rise (mean of the last third of the
   steps minus the first third's, and a least-squares slope per step).

    python examples/trl/train_tiny.py [--run runs/trl-tiny] [--steps 8] [--seconds 300] [--seed 0]

Measured once on a loaded 2-core machine: 20 minutes, 703 CPU-seconds, and the training reward did not rise over
its 8 steps (docs/trl.md, benchmarks/results/trl-tiny.json).
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

from openforge.integrations.trl import OpenForgeRollout, openforge_reward, task_dataset  # noqa: E402
from openforge.rollout import RolloutConfig  # noqa: E402
from openforge.tasks import QUICKSTART_FAMILIES, InstanceSampler  # noqa: E402
from openforge.train.data import RL_SEED, write_instances  # noqa: E402
from openforge.train.pipeline import run_training  # noqa: E402
from openforge.train.quickstart import QUICKSTART, quickstart_config  # noqa: E402
from openforge.train.sft_stage import SFT_DIR  # noqa: E402


def sft_checkpoint(run: Path, seed: int) -> tuple[Path, float | None]:
    """The quickstart's SFT policy (teacher + SFT, no GRPO) and its greedy held-out pass@1."""
    config = quickstart_config(
        {
            "run": str(run),
            "sandbox": "local",
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
    parser.add_argument("--seconds", type=float, default=300.0, help="TRL's GRPO wall-clock budget")
    parser.add_argument("--steps", type=int, default=8, help="at most this many GRPO steps")
    parser.add_argument("--pool", type=int, default=8, help="training tasks, revisited (TRL's epochs)")
    parser.add_argument(
        "--families",
        default="copy_file,count_lines,replace_word",
        help="the pool's task families (default: those the SFT policy already solves at times: a group whose "
        "episodes all fail teaches nothing)",
    )
    parser.add_argument(
        "--prompts",
        type=int,
        default=8,
        help="tasks per step (the whole pool: each step's reward is over the same tasks)",
    )
    parser.add_argument("--group", type=int, default=4, help="episodes per task (num_generations)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling (and TRL's scoring) temperature")
    parser.add_argument("--lr", type=float, default=5e-4)
    args = parser.parse_args()
    run = args.run.resolve()
    started = time.monotonic()

    sft, sft_pass = sft_checkpoint(run / "sft", args.seed)
    sft_s = time.monotonic() - started

    # a pool of fresh training instances (never the teacher's, never held out), written as task directories and
    # revisited epoch after epoch (a dataset, as TRL trains on one); GRPO starts over
    for stale in (run / "tasks", run / "trl"):
        shutil.rmtree(stale, ignore_errors=True)
    families = args.families.split(",")
    unknown = sorted(set(families) - set(QUICKSTART_FAMILIES))
    if unknown:
        parser.error(f"--families: {unknown} are not the quickstart's ({', '.join(QUICKSTART_FAMILIES)})")
    instances = InstanceSampler("train", seed=RL_SEED + args.seed, families=families).sample(args.pool)
    write_instances(instances, run / "tasks")
    config = RolloutConfig(
        tasks=[run / "tasks"],
        harnesses=["react"],
        harness_options=QUICKSTART["harness_options"],
        max_new_tokens=QUICKSTART["max_new_tokens"],
        sandbox="local",
        model=sft,
        backend="embedded",
        run=run / "trl",
        concurrency=8,
        warm_sandboxes=8,
    )
    grpo = GRPOConfig(
        output_dir=str(run / "trl" / "trainer"),
        per_device_train_batch_size=args.prompts * args.group,
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
    with OpenForgeRollout(config) as rollout:
        trainer = GRPOTrainer(
            model=str(sft),
            reward_funcs=openforge_reward,
            args=grpo,
            train_dataset=task_dataset([i.task_id() for i in instances]),
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
        "grpo": {
            "pool": args.pool,
            "families": families,
            "prompts": args.prompts,
            "group": args.group,
            "lr": args.lr,
            "temperature": args.temperature,
            "steps": len(steps),
        },
        "steps": steps,
        "reward": rise(rewards),
        "wall_s": {"sft": round(sft_s, 1), "grpo": round(grpo_s, 1), "total": round(time.monotonic() - started, 1)},
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
