"""Synchronous against asynchronous GRPO, side by side from one SFT policy: the quickstart's GRPO stage (its
preset, its 240 s budget) run from the same SFT checkpoint with `rl.max_staleness` 0 and K, alternating the
order each round; GRPO steps in the budget, CPU use during GRPO (this process and its children against the two
cores), the update's share and held-out pass@1 before (the SFT policy) and after.

    openforge quickstart --seed 0 --run runs/quickstart   # once: the SFT policy (runs/quickstart/checkpoints/sft)
    python benchmarks/async_grpo.py                       # 1 round, about 10 minutes on 2 cores
    python benchmarks/async_grpo.py --rounds 2 --seconds 120 --results benchmarks/results/async-grpo-short.json

Each run is `openforge train --config CFG --run OUT/round-R-MODE` in its own process. Measure on a quiet
machine: the ratio of steps is what it reports. Not a test: no assertions, only figures.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml
from _machine import run_metadata
from rich.console import Console
from rich.table import Table

from openforge.train.pipeline import GRPO_PHASE
from openforge.train.quickstart import QUICKSTART
from openforge.train.records import report_step_records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft", type=Path, default=Path("runs/quickstart/checkpoints/sft"), help="the SFT policy")
    parser.add_argument("--staleness", type=int, default=2, help="rl.max_staleness of the asynchronous runs")
    parser.add_argument("--seconds", type=float, default=QUICKSTART["rl"]["seconds"], help="GRPO's budget")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-async-grpo"))
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/async-grpo.json"))
    args = parser.parse_args()
    if args.staleness < 1:  # 0 is the synchronous run every round already makes
        parser.error("--staleness must be at least 1: each round compares it with the synchronous run (0)")
    console = Console()
    if not (args.sft / "config.json").is_file():
        sys.exit(f"no SFT policy at {args.sft}: run `openforge quickstart --seed {args.seed}` first, or give --sft")
    runs: list[dict] = []
    for r in range(args.rounds):
        modes = [0, args.staleness] if r % 2 == 0 else [args.staleness, 0]
        for staleness in modes:
            runs.append(run_grpo(args, r, staleness, console))
    write_results(args, runs, console)


def grpo_config(args: argparse.Namespace, staleness: int) -> dict:
    """The quickstart's preset from the SFT policy: no teacher, no SFT, GRPO for `--seconds`, then held-out
    pass@1 of the SFT policy ("base" here) and of the trained one."""
    config = copy.deepcopy(QUICKSTART)
    config.update(model=str(args.sft.resolve()), sft=None, seed=args.seed, sandbox="auto", validate_tasks=False)
    config["rl"].update(max_staleness=staleness, seconds=args.seconds)
    return config


def run_grpo(args: argparse.Namespace, round_: int, staleness: int, console: Console) -> dict:
    mode = "sync" if staleness == 0 else f"async-k{staleness}"
    run = args.out / f"round-{round_}-{mode}"
    if run.exists():  # a fresh run each time (train refuses a used run directory without --resume)
        shutil.rmtree(run)
    run.mkdir(parents=True)
    config_file = run.parent / f"{run.name}.yaml"
    config_file.write_text(yaml.safe_dump(grpo_config(args, staleness)))
    console.rule(f"round {round_}: {mode}")
    started = time.monotonic()
    argv = [sys.executable, "-m", "openforge.cli", "train", "--config", str(config_file), "--run", str(run)]
    subprocess.run(argv, check=True)
    report = json.loads((run / "report.json").read_text())
    steps = report_step_records(report)
    grpo_s = report["timings_s"][GRPO_PHASE]
    return {
        "round": round_,
        "mode": mode,
        "max_staleness": staleness,
        "grpo_steps": len(steps),
        "steps_per_min": round(60 * len(steps) / grpo_s, 2),
        "grpo_s": grpo_s,
        "grpo_cpu": report.get("grpo_cpu"),
        "update_s_mean": round(statistics.mean(s["train_s"] for s in steps), 3) if steps else None,
        "staleness": [steps[-1].get("staleness")] if steps else None,  # the last step's histogram
        "heldout_pass_at_1": {"sft": report["heldout_pass_at_1"].get("base"), "rl": report["heldout_pass_at_1"]["rl"]},
        "wall_s": round(time.monotonic() - started, 1),
    }


def write_results(args: argparse.Namespace, runs: list[dict], console: Console) -> None:
    def mean(mode: str, key: str) -> float:
        return statistics.mean(float(r[key]) for r in runs if r["mode"] == mode)

    def cpu(mode: str, key: str = "share") -> float:
        return statistics.mean(r["grpo_cpu"].get(key, float("nan")) for r in runs if r["mode"] == mode)

    asynchronous = f"async-k{args.staleness}"
    summary = {
        "steps_ratio": round(mean(asynchronous, "grpo_steps") / mean("sync", "grpo_steps"), 3),
        **{
            mode: {
                "grpo_steps": mean(mode, "grpo_steps"),
                "cpu_share": round(cpu(mode), 3),
                "machine_share": round(cpu(mode, "machine_share"), 3),
            }
            for mode in ("sync", asynchronous)
        },
    }
    table = Table(title=f"GRPO from one SFT policy, {args.seconds:.0f} s each")
    for column in ("round", "mode", "steps", "steps/min", "CPU share", "machine", "update s", "held-out SFT → RL (%)"):
        table.add_column(column)
    for r in runs:
        held = r["heldout_pass_at_1"]
        table.add_row(
            str(r["round"]),
            r["mode"],
            str(r["grpo_steps"]),
            str(r["steps_per_min"]),
            str((r["grpo_cpu"] or {}).get("share")),
            str((r["grpo_cpu"] or {}).get("machine_share")),
            str(r["update_s_mean"]),
            f"{held['sft']} → {held['rl']}",
        )
    console.print(table)
    console.print(f"steps, asynchronous / synchronous: {summary['steps_ratio']}×")
    configuration = {k: v for k, v in vars(args).items() if k not in ("out", "results", "sft")}
    results = {**run_metadata("python " + " ".join(sys.argv), configuration), "runs": runs, "summary": summary}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=1) + "\n")
    console.print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
