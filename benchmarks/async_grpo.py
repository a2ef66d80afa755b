"""Synchronous against asynchronous GRPO, side by side from one SFT policy: the quickstart's GRPO stage (its
preset, its 240 s budget) run from the same SFT checkpoint with `rl.max_staleness` 0 and K, alternating the
order each round; GRPO steps in the budget, CPU use during GRPO (this process and its children against the two
cores), the update's share and held-out pass@1 before (the SFT policy) and after.

    python benchmarks/quickstart.py --control --out runs/bench-quickstart   # once: each seed's SFT policy and control
    python benchmarks/async_grpo.py --seeds 0 1 2         # 1 round per seed, about 10 minutes each on 2 cores
    python benchmarks/async_grpo.py --sft runs/quickstart/checkpoints/sft --rounds 2 --seconds 120

`--sft` is the SFT policy, `{seed}` in it replaced by each seed; where the run that made it has a report with the
same-compute control (`benchmarks/quickstart.py --control`: GRPO's time spent on more SFT), its held-out pass@1 is
in the table beside the two GRPO runs.

Each run is `openforge train --config CFG --run OUT/seed-S-round-R-MODE` in its own process. Measure on a quiet
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
from collections.abc import Callable
from pathlib import Path

import _machine
import yaml
from rich.console import Console
from rich.table import Table

from openforge.train.pipeline import GRPO_PHASE
from openforge.train.quickstart import QUICKSTART
from openforge.train.records import report_step_records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sft",
        default="runs/bench-quickstart/seed-{seed}/checkpoints/sft",
        help="the SFT policy; {seed} is replaced by each seed",
    )
    parser.add_argument("--staleness", type=int, default=2, help="rl.max_staleness of the asynchronous runs")
    parser.add_argument("--seconds", type=float, default=QUICKSTART["rl"]["seconds"], help="GRPO's budget")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="a policy per seed (--sft's {seed})")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-async-grpo"))
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/async-grpo.json"))
    args = parser.parse_args()
    if args.staleness < 1:  # 0 is the synchronous run every round already makes
        parser.error("--staleness must be at least 1: each round compares it with the synchronous run (0)")
    console = Console()
    policies = {seed: Path(args.sft.format(seed=seed)) for seed in args.seeds}
    for seed, sft in policies.items():
        if not (sft / "config.json").is_file():
            sys.exit(f"no SFT policy at {sft}: run `python benchmarks/quickstart.py --seeds {seed}`, or give --sft")
    runs: list[dict] = []
    for seed, sft in policies.items():
        for r in range(args.rounds):
            modes = [0, args.staleness] if r % 2 == 0 else [args.staleness, 0]
            for staleness in modes:
                runs.append(run_grpo(args, seed, sft, r, staleness, console))
    controls = {seed: control_pass_at_1(sft) for seed, sft in policies.items()}
    write_results(args, runs, controls, console)


def control_pass_at_1(sft: Path) -> float | None:
    """Held-out pass@1 of the same-compute control (more SFT for GRPO's time) of the run that made `sft`
    (RUN/checkpoints/sft), when that run had one."""
    report = sft.parent.parent / "report.json"
    if not report.is_file():
        return None
    return json.loads(report.read_text()).get("heldout_pass_at_1", {}).get("sft_more")


def grpo_config(args: argparse.Namespace, seed: int, sft: Path, staleness: int) -> dict:
    """The quickstart's preset from the SFT policy: no teacher, no SFT, GRPO for `--seconds`, then held-out
    pass@1 of the SFT policy ("base" here) and of the trained one."""
    config = copy.deepcopy(QUICKSTART)
    config.update(model=str(sft.resolve()), sft=None, seed=seed, sandbox="auto", validate_tasks=False)
    config["rl"].update(max_staleness=staleness, seconds=args.seconds)
    return config


def run_grpo(args: argparse.Namespace, seed: int, sft: Path, round_: int, staleness: int, console: Console) -> dict:
    mode = "sync" if staleness == 0 else f"async-k{staleness}"
    run = args.out / f"seed-{seed}-round-{round_}-{mode}"
    if run.exists():  # a fresh run each time (train refuses a used run directory without --resume)
        shutil.rmtree(run)
    run.mkdir(parents=True)
    config_file = run.parent / f"{run.name}.yaml"
    config_file.write_text(yaml.safe_dump(grpo_config(args, seed, sft, staleness)))
    console.rule(f"seed {seed}, round {round_}: {mode}")
    started = time.monotonic()
    argv = [sys.executable, "-m", "openforge.cli", "train", "--config", str(config_file), "--run", str(run)]
    subprocess.run(argv, check=True)
    report = json.loads((run / "report.json").read_text())
    steps = report_step_records(report)
    grpo_s = report["timings_s"][GRPO_PHASE]
    return {
        "seed": seed,
        "round": round_,
        "mode": mode,
        "max_staleness": staleness,
        "grpo_steps": len(steps),
        "steps_per_min": round(60 * len(steps) / grpo_s, 2),
        "grpo_s": grpo_s,
        "grpo_cpu": report.get("grpo_cpu"),
        "machine_cpu_s_per_step": machine_cpu_per_step(report.get("grpo_cpu"), len(steps)),
        "update_s_mean": round(statistics.mean(s["train_s"] for s in steps), 3) if steps else None,
        "staleness": [steps[-1].get("staleness")] if steps else None,  # the last step's histogram
        "heldout_pass_at_1": {"sft": report["heldout_pass_at_1"].get("base"), "rl": report["heldout_pass_at_1"]["rl"]},
        "wall_s": round(time.monotonic() - started, 1),
    }


def machine_cpu_per_step(grpo_cpu: dict | None, steps: int) -> float | None:
    """The whole machine's CPU seconds per GRPO step (what overlap must not raise to gain steps)."""
    if not grpo_cpu or "machine_cpu_s" not in grpo_cpu or steps == 0:
        return None
    return round(grpo_cpu["machine_cpu_s"] / steps, 2)


def write_results(
    args: argparse.Namespace, runs: list[dict], controls: dict[int, float | None], console: Console
) -> None:
    asynchronous = f"async-k{args.staleness}"

    def avg(mode: str, value: Callable[[dict], float], seed: int | None = None) -> float:
        """The mean of `value` over the runs of `mode` (of `seed`, or all)."""
        return statistics.mean(float(value(r)) for r in runs if r["mode"] == mode and seed in (None, r["seed"]))

    def steps(r: dict) -> float:
        return r["grpo_steps"]

    def rl(r: dict) -> float:
        return r["heldout_pass_at_1"]["rl"]

    def cpu(mode: str, key: str) -> float | None:
        shares = [r["grpo_cpu"][key] for r in runs if r["mode"] == mode and key in (r["grpo_cpu"] or {})]
        return round(statistics.mean(shares), 3) if shares else None  # (reports before the machine figure: None)

    by_seed = {
        seed: {
            "sft": next(r["heldout_pass_at_1"]["sft"] for r in runs if r["seed"] == seed),
            "rl_sync": avg("sync", rl, seed),
            f"rl_{asynchronous}": avg(asynchronous, rl, seed),
            "control": controls[seed],
            "steps_sync": avg("sync", steps, seed),
            f"steps_{asynchronous}": avg(asynchronous, steps, seed),
        }
        for seed in args.seeds
    }
    summary = {
        "steps_ratio": round(avg(asynchronous, steps) / avg("sync", steps), 3),
        **{
            mode: {
                "grpo_steps": avg(mode, steps),
                "cpu_share": cpu(mode, "share"),
                "machine_share": cpu(mode, "machine_share"),
                "heldout_rl": round(avg(mode, rl), 4),
            }
            for mode in ("sync", asynchronous)
        },
        "by_seed": by_seed,
    }
    table = Table(title=f"GRPO from each seed's SFT policy, {args.seconds:.0f} s each")
    columns = ("seed", "round", "mode", "steps", "steps/min", "CPU share", "machine", "update s", "SFT → RL (%)")
    for column in columns:
        table.add_column(column)
    for r in runs:
        pass_at_1 = r["heldout_pass_at_1"]
        table.add_row(
            str(r["seed"]),
            str(r["round"]),
            r["mode"],
            str(r["grpo_steps"]),
            str(r["steps_per_min"]),
            str((r["grpo_cpu"] or {}).get("share")),
            str((r["grpo_cpu"] or {}).get("machine_share")),
            str(r["update_s_mean"]),
            f"{percent(pass_at_1['sft'])} → {percent(pass_at_1['rl'])}",
        )
    console.print(table)
    heldout = Table(title="held-out pass@1 (%) by seed")
    for column in ("seed", "SFT", "SFT + GRPO (sync)", f"SFT + GRPO (K = {args.staleness})", "control: more SFT"):
        heldout.add_column(column)
    for seed, row in by_seed.items():
        policies = ("sft", "rl_sync", f"rl_{asynchronous}", "control")
        heldout.add_row(str(seed), *(percent(row[k]) for k in policies))
    console.print(heldout)
    console.print(f"steps, asynchronous / synchronous: {summary['steps_ratio']}×")
    configuration = {k: v for k, v in vars(args).items() if k not in ("out", "results")}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    _machine.write_results(args.results, "python benchmarks/async_grpo.py", configuration, runs=runs, summary=summary)


def percent(fraction: float | None) -> str:
    return "–" if fraction is None else f"{100 * fraction:.1f}"


if __name__ == "__main__":
    main()
