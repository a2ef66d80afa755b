"""The embedded engine's options on real episodes: a real model's greedy held-out episodes through a real harness
in Docker, with and without `engine_options` (cascade attention and oneDNN linears), side by side.

What the real-model recipe's evaluation does (its harness options, token cap and greedy sampling), on a trained
policy: the engine options exist to make that cheaper. Each variant runs in a fresh process; rounds alternate.

    openforge quickstart --recipe real-model        # or benchmarks/recovery.py --recipe real-model
    python benchmarks/engine_options_episodes.py --model RUN/checkpoints/sft --tasks RUN/tasks/heldout \\
        --rounds 2 --results benchmarks/results/engine-options-episodes.json

Per run: wall seconds, episodes per minute, the machine's CPU seconds per episode, pass rate, model calls and
tokens, each harness's mean episode seconds; the figure is episodes per minute (the outcomes should agree:
greedy, float32, the same tokens). `--harness` takes several harnesses (each task in each, as the recipe's
transfer evaluation runs react and Codex together); `--variants options` runs one variant, for `benchmarks/ab.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _machine import host_cpu_s, write_results
from _rounds import alternating_rounds, worker_figures

from openforge.rollout import RolloutConfig, run_rollouts
from openforge.store import TrajectoryStore
from openforge.train.config import TrainConfig
from openforge.train.quickstart import RECIPES

VARIANTS = {"default": {}, "options": {"cascade_attention": True, "onednn_linears": True}}


def worker(args: argparse.Namespace) -> None:
    recipe = TrainConfig.model_validate(RECIPES["real-model"])
    run = args.work / args.worker / "run"
    shutil.rmtree(run, ignore_errors=True)
    config = RolloutConfig(
        tasks=[args.tasks],
        task_ids=sorted(p.name for p in args.tasks.iterdir() if p.is_dir())[: args.limit],
        harnesses=args.harness,
        harness_options=recipe.harness_options,
        max_new_tokens=recipe.max_new_tokens,
        temperature=0.0,
        model=args.model,
        run=run,
        sandbox="docker",
        concurrency=args.concurrency,
        image_map={"debian:bookworm-slim": "openforge-base:bookworm"},
        engine_options=VARIANTS[args.worker],
    )
    start, cpu_start = time.monotonic(), host_cpu_s()
    outcomes = asyncio.run(run_rollouts(config)).outcomes
    wall, cpu = time.monotonic() - start, host_cpu_s() - cpu_start
    with TrajectoryStore.open(run) as store:
        episodes = store.final_episodes()
        calls = [c for e in episodes for c in store.list_calls(e.id)]
        passed = {f"{e.task}|{e.harness}": e.reward == 1.0 for e in episodes}
    seconds: dict[str, list[float]] = {}
    for e in episodes:
        seconds.setdefault(str(e.harness), []).append((e.ended_at or e.created_at) - e.created_at)
    print(
        json.dumps(
            {
                "wall_s": round(wall, 2),
                "episodes": len(episodes),
                "episodes_per_min": round(60 * len(episodes) / wall, 1),
                "host_cpu_s_per_episode": round(cpu / max(1, len(episodes)), 3),
                "pass_rate": round(sum(passed.values()) / max(1, len(passed)), 3),
                "passed": passed,
                "calls": len(calls),
                "output_tokens": sum(len(c.output_ids) for c in calls),
                "outcomes": outcomes,
                "episode_s_by_harness": {h: round(statistics.mean(v), 2) for h, v in sorted(seconds.items())},
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a trained policy (a checkpoint directory)")
    parser.add_argument("--tasks", type=Path, required=True, help="the held-out task directories")
    parser.add_argument("--harness", nargs="+", default=["claude-code"], help="one or more harnesses")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--limit", type=int, default=None, help="the first N tasks only")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "openforge-engine-episodes")
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument("--worker", choices=list(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    def measure(variant: str) -> dict:
        command = [sys.executable, __file__, "--worker", variant, "--model", str(args.model), "--tasks"]
        command += [str(args.tasks), "--harness", *args.harness, "--concurrency", str(args.concurrency)]
        command += ["--work", str(args.work)] + (["--limit", str(args.limit)] if args.limit else [])
        return worker_figures(command)

    def report(r: int, variant: str, got: dict) -> None:
        print(
            f"round {r + 1} {variant:>8}: {got['episodes']} episodes in {got['wall_s']:.1f} s = "
            f"{got['episodes_per_min']} /min, CPU {got['host_cpu_s_per_episode']} s/episode, "
            f"pass {got['pass_rate']}, {got['calls']} calls, {got['output_tokens']} tokens, "
            f"episode seconds {got['episode_s_by_harness']}",
            flush=True,
        )

    runs = alternating_rounds(args.variants, args.rounds, measure, report)
    summary = {}
    for variant, got in runs.items():
        summary[variant] = {
            "episodes_per_min_median": statistics.median(g["episodes_per_min"] for g in got),
            "host_cpu_s_per_episode_median": statistics.median(g["host_cpu_s_per_episode"] for g in got),
            "pass_rate": [g["pass_rate"] for g in got],
            "calls": [g["calls"] for g in got],
            "output_tokens": [g["output_tokens"] for g in got],
            "wall_s": [g["wall_s"] for g in got],
            "episode_s_by_harness": [g["episode_s_by_harness"] for g in got],
        }
    ratio = None
    if len(summary) == 2:
        ratio = summary["options"]["episodes_per_min_median"] / summary["default"]["episodes_per_min_median"]
        print(f"options / default: {ratio:.2f}x episodes per minute")
    first = next(iter(runs.values()))[0]["passed"]
    same = all(g["passed"] == first for got in runs.values() for g in got)
    print(f"the same tasks passed in every run: {same}")
    if args.results:
        configuration = {"model": args.model.name, "tasks": len(first), "harness": args.harness}
        write_results(
            args.results,
            "python benchmarks/engine_options_episodes.py",
            configuration,
            variants=summary,
            options_over_default=round(ratio, 2) if ratio is not None else None,
            same_tasks_passed=same,
            runs=runs,
        )


if __name__ == "__main__":
    main()
