"""The full quickstart over several seeds: held-out pass@1 of base, SFT and SFT+RL (mean and spread) and each
phase's wall time. Target: SFT+RL beats SFT by at least 10 points on the mean.

    python benchmarks/quickstart.py                 # 3 seeds, about 40 minutes on 2 cores
    python benchmarks/quickstart.py --seeds 0 --out runs/bench-quickstart
    python benchmarks/quickstart.py --control       # also the same-compute control: GRPO's time spent on SFT
    python benchmarks/quickstart.py --max-staleness 2 --out runs/bench-async \
        --results benchmarks/results/quickstart-async.json    # asynchronous GRPO (rl.max_staleness: 2)

Each seed runs `openforge quickstart --seed S --run OUT/seed-S` in its own process (a fresh interpreter per
seed, so one seed's memory and threads never slow the next) and the figures are read from its report.json.
Not a test: no assertions, only figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _machine import public_argv, run_metadata
from rich.console import Console
from rich.table import Table

from openforge.train.records import report_step_records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-quickstart"))
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="YAML of TrainConfig fields laid over the quickstart's preset, for every seed",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="use OUT/seed-S/report.json where a finished run left one (wall time = its phases' sum)",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="also run the same-compute control (more SFT for GRPO's wall time) and report it",
    )
    parser.add_argument(
        "--max-staleness",
        type=int,
        default=None,
        help="rl.max_staleness for every seed (asynchronous GRPO; 0 = synchronous, the preset's default)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=Path("benchmarks/results/quickstart.json"),
        help="where the figures go (JSON, committed beside the README that quotes them)",
    )
    args = parser.parse_args()
    console = Console()
    reports = run_seeds(
        args.seeds, args.out, [], args.config, args.control, args.reuse, console, max_staleness=args.max_staleness
    )

    table = Table(title=f"held-out pass@1 over {len(reports)} seed(s)")
    table.add_column("policy")
    for seed in args.seeds:
        table.add_column(f"seed {seed}", justify="right")
    table.add_column("mean", justify="right")
    table.add_column("spread (sd)", justify="right")
    policies = ["base", "sft", "rl"] + (
        ["sft_more"] if all("sft_more" in r["heldout_pass_at_1"] for r in reports) else []
    )
    for policy in policies:
        values = [100 * r["heldout_pass_at_1"][policy] for r in reports]
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        table.add_row(policy, *[f"{v:.1f}" for v in values], f"{statistics.mean(values):.1f}", f"{sd:.1f}")
    gains = [100 * (r["heldout_pass_at_1"]["rl"] - r["heldout_pass_at_1"]["sft"]) for r in reports]
    sd = statistics.stdev(gains) if len(gains) > 1 else 0.0
    table.add_row("RL − SFT", *[f"{g:+.1f}" for g in gains], f"{statistics.mean(gains):+.1f}", f"{sd:.1f}")
    if "sft_more" in policies:
        more = [100 * (r["heldout_pass_at_1"]["sft_more"] - r["heldout_pass_at_1"]["sft"]) for r in reports]
        sd_more = statistics.stdev(more) if len(more) > 1 else 0.0
        table.add_row("more SFT − SFT", *[f"{g:+.1f}" for g in more], f"{statistics.mean(more):+.1f}", f"{sd_more:.1f}")
    console.print(table)

    phases = phase_table(reports, args.seeds)
    console.print(phases)
    console.print(f"target: SFT+RL beats SFT by >= 10 points on the mean; measured {statistics.mean(gains):+.1f}")
    write_results(args.results, args.seeds, reports, policies)


def mean_train_s(steps: list[dict]) -> float | None:
    times = [s["train_s"] for s in steps if isinstance(s.get("train_s"), (int, float))]
    return round(statistics.mean(times), 3) if times else None


def write_results(path: Path, seeds: list[int], reports: list[dict], policies: list[str]) -> None:
    """Per seed: held-out pass@1 of each policy (percent), GRPO steps, phase times; means and sds."""
    per_seed = {
        str(seed): {
            "heldout_pass_at_1": {p: round(100 * r["heldout_pass_at_1"][p], 2) for p in policies},
            "grpo_steps": len(report_step_records(r)),
            "max_staleness": r.get("max_staleness", 0),
            "grpo_cpu": r.get("grpo_cpu"),  # CPU use during GRPO: share of wall time × cores
            "mean_episode_s": r.get("mean_episode_s"),  # trained episodes' mean wall time
            "mean_episode_tokens": r.get("mean_episode_tokens"),  # and sampled tokens
            "stale_groups_dropped": r.get("stale_groups_dropped", 0),
            "lora": r.get("lora"),  # the run's LoRA settings (None: full fine-tuning)
            "sft_s_per_step": (r.get("sft") or {}).get("seconds_per_step"),
            "grpo_train_s_mean": mean_train_s(report_step_records(r)),  # the update alone, per GRPO step
            "peak_rss_mb": r.get("peak_rss_mb"),  # the training process's peak memory
            "timings_s": r["timings_s"],
            "wall_s": r["wall_s"],
            "sandbox": r.get("sandbox"),
        }
        for seed, r in zip(seeds, reports)
    }
    summary = {}
    for p in policies:
        values = [100 * r["heldout_pass_at_1"][p] for r in reports]
        summary[p] = {
            "mean": round(statistics.mean(values), 2),
            "sd": round(statistics.stdev(values), 2) if len(values) > 1 else 0.0,
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    configuration = {"preset": "QUICKSTART (openforge/train/quickstart.py)", "seeds": seeds, "policies": policies}
    meta = run_metadata("python " + public_argv(sys.argv), configuration)
    path.write_text(json.dumps({**meta, "seeds": per_seed, "summary": summary}, indent=2) + "\n")


def run_seeds(
    seeds: list[int],
    out: Path,
    recipe_argv: list[str],
    config: Path | None,
    control: bool,
    reuse: bool,
    console: Console,
    max_staleness: int | None = None,
) -> list[dict]:
    """`openforge quickstart [RECIPE_ARGV] --seed S --run OUT/seed-S` per seed, each in its own process (a fresh
    interpreter per seed, so one seed's memory and threads never slow the next); the reports, with `wall_s`.
    `reuse`: a seed whose run left a report.json is read, not run again."""
    reports = []
    for seed in seeds:
        run = out / f"seed-{seed}"
        if reuse and (run / "report.json").is_file():
            report = json.loads((run / "report.json").read_text())
            report["wall_s"] = round(sum(report["timings_s"].values()), 1)
            reports.append(report)
            console.print(f"seed {seed}: reusing {run / 'report.json'}")
            continue
        argv = [
            sys.executable,
            "-m",
            "openforge.cli",
            "quickstart",
            *recipe_argv,
            "--seed",
            str(seed),
            "--run",
            str(run),
            "--config",
            str(seed_config(config, seed, control, run, max_staleness)),
        ]
        started = time.monotonic()
        console.rule(f"seed {seed}")
        subprocess.run(argv, check=True)
        report = json.loads((run / "report.json").read_text())
        report["wall_s"] = round(time.monotonic() - started, 1)
        reports.append(report)
    return reports


def phase_table(reports: list[dict], seeds: list[int]) -> Table:
    """Wall time per phase, the whole run and GRPO's steps, one column per seed."""
    phases = Table(title="wall time per phase (s)")
    phases.add_column("phase")
    for seed in seeds:
        phases.add_column(f"seed {seed}", justify="right")
    for name in dict.fromkeys(n for r in reports for n in r["timings_s"]):
        phases.add_row(name, *[str(r["timings_s"].get(name, "-")) for r in reports])
    phases.add_row("whole quickstart", *[str(r["wall_s"]) for r in reports])
    phases.add_row("GRPO steps", *[str(len(report_step_records(r))) for r in reports])
    phases.add_row("GRPO CPU share", *[str((r.get("grpo_cpu") or {}).get("share", "-")) for r in reports])
    phases.add_row("GRPO machine CPU", *[str((r.get("grpo_cpu") or {}).get("machine_share", "-")) for r in reports])
    return phases


def seed_config(path: Path | None, seed: int, control: bool, run: Path, max_staleness: int | None = None) -> Path:
    """The YAML config of one seed: the given file's fields, this seed, the control switch and the staleness
    bound."""
    import yaml

    from openforge.train.quickstart import overlay

    fields = yaml.safe_load(path.read_text()) if path else {}
    fields = overlay(fields or {}, {"seed": seed, "sft": {"control": control}})
    if max_staleness is not None:
        fields = overlay(fields, {"rl": {"max_staleness": max_staleness}})
    run.mkdir(parents=True, exist_ok=True)
    out = run / "benchmark-config.yaml"
    out.write_text(yaml.safe_dump(fields))
    return out


if __name__ == "__main__":
    main()
