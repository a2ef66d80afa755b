"""Embedded-engine benchmark: the quickstart's RL workload on the tiny model, batched prefill vs the former schedule.

The workload (one round of RL episodes right after a weight swap, so the prefix cache starts empty): N concurrent
requests, one per episode (`GenerationContext(episode_id=f"e{i}")`), each a shared ~100-token system-prompt
prefix followed by a distinct ~20-token user message, sampled at temperature 1 with max_tokens 48 (the tiny
model may stop earlier at its end-of-sequence token; the same seeds give the same lengths in both engines).

The engines, side by side, each on a fresh backend
(`make_backend("embedded", model_dir, max_batch=128, prefix_cache_entries=512, seed=0)`):

  batched   the current engine: short prompts read together in one forward pass, the shared prefix reused
            across episodes as soon as one prompt holding it has been read, a decode batch whose cache grows
            in place (no copy of the whole cache per step, per job joining or per job leaving)
  former    the same with `batched_prefill=False`: one prompt per engine turn (each interleaved with a decode
            step), each job joining the decode batch on its own, caches kept only when a call ends (the
            former schedule, on the current decode batch and prefix cache)
  options   batched with the backend options `cascade_attention` and `onednn_linears` on (the shared prefix
            kept once in the decode batch, linear layers through oneDNN: docs/inference.md)
  old       the engine as it was before this work (`--old-rev`, extracted with `git archive` into a temporary
            directory and imported from there; nothing in the working tree changes): the former schedule, and a
            decode batch whose cache is copied whole at every step and rebuilt for every job joining or leaving

Printed per N: wall seconds of `asyncio.gather` over the N `backend.generate` calls (backend construction not
counted), the process's CPU seconds meanwhile (all threads), generated tokens per second (by wall time), and
the ratios of wall and CPU time to the batched engine's. Every measurement runs in a fresh process (a warm-up
of 4 requests first, not counted). The rounds interleave the engines and the medians are
reported: the machine may be shared and noisy, so read the ratios, not the absolute figures. On a machine shared
with other CPU-heavy work, torch's OpenMP threads spin-waiting for each other can make every run many times
slower and erratic; `--threads 1` or `OMP_WAIT_POLICY=PASSIVE` in the environment avoids that.

    .venv/bin/python benchmarks/engine.py [--sizes 16 64 128] [--rounds 1] [--threads T]
                                          [--engines batched former old options] [--old-rev REV]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import public_argv, run_metadata
from _rounds import alternating_rounds, worker_figures

from openforge.core import SamplingParams
from openforge.inference import make_backend
from openforge.inference.base import GenerationContext
from openforge.models import ModelDir, build_tiny_model

REPO = Path(__file__).resolve().parents[1]
ENGINES = ["batched", "former", "old", "options"]
OLD_REV = "287e7c5"  # the engine before batched prefill (one prompt per turn, a batch rebuild per job)
PREFIX_TOKENS = 100
SUFFIX_TOKENS = 20
MAX_TOKENS = 48

SYSTEM = (
    "You are a careful software engineer working in a Linux sandbox. Use the bash tool to inspect files, run "
    "the tests and edit code. Think step by step, keep your answers short, and finish with a summary of the "
    "change you made and why it fixes the task. Never delete the repository or leave it broken. "
)


def workload(model: ModelDir, n: int) -> list[list[int]]:
    """n prompts: the same PREFIX_TOKENS-token system prompt, then a distinct SUFFIX_TOKENS-token user message."""
    prefix = model.encode_text(SYSTEM * 4)[:PREFIX_TOKENS]
    assert len(prefix) == PREFIX_TOKENS
    prompts = []
    for i in range(n):
        suffix = model.encode_text(f"Task {i}: fix bug number {i * 7919 % 1000} in module m{i} and run its tests.")
        suffix = (suffix * 4)[:SUFFIX_TOKENS]
        prompts.append(prefix + suffix)
    return prompts


async def run_once(
    model: ModelDir, prompts: list[list[int]], threads: int | None, **options
) -> tuple[float, float, int, float]:
    """(wall seconds, CPU seconds, generated tokens, mean prompt tokens reused) for all prompts at once, on a
    fresh backend."""
    backend = make_backend(
        "embedded", model, max_batch=128, prefix_cache_entries=512, seed=0, num_threads=threads, **options
    )
    try:
        sampling = SamplingParams(temperature=1.0, max_tokens=MAX_TOKENS)
        t0, c0 = time.perf_counter(), time.process_time()
        results = await asyncio.gather(
            *(backend.generate(p, sampling, GenerationContext(episode_id=f"e{i}")) for i, p in enumerate(prompts))
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        await backend.close()
    tokens = sum(len(r.output_ids) for r in results)
    reused = statistics.mean(r.timings["prompt_tokens_reused"] for r in results)
    return wall, cpu, tokens, reused


def worker(engine: str, n: int, threads: int | None) -> None:
    """One measurement in this process (a warm-up run first); prints it as JSON."""
    model = ModelDir(build_tiny_model(Path(tempfile.mkdtemp(prefix="openforge-bench-engine-")) / "tiny", seed=0))
    options: dict = {} if engine == "old" else {"batched_prefill": engine != "former"}  # the old code lacks the flag
    if engine == "options":
        options.update(cascade_attention=True, onednn_linears=True)
    asyncio.run(run_once(model, workload(model, 4), threads, **options))
    wall, cpu, tokens, reused = asyncio.run(run_once(model, workload(model, n), threads, **options))
    print(json.dumps({"wall": wall, "cpu": cpu, "tokens": tokens, "reused": reused}))


def measure(engine: str, n: int, threads: int | None, old_tree: Path | None) -> dict:
    """Each measurement in a fresh process; `old` imports openforge from the extracted old revision."""
    env = dict(os.environ)
    if engine == "old":
        env["PYTHONPATH"] = str(old_tree)
    command = [sys.executable, __file__, "--worker", engine, str(n)] + (["--threads", str(threads)] if threads else [])
    return worker_figures(command, env=env, cwd=tempfile.gettempdir())


def extract(rev: str) -> Path:
    """`openforge/` of git revision `rev` in a temporary directory (no checkout, no stash)."""
    tree = Path(tempfile.mkdtemp(prefix="openforge-bench-old-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "openforge"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES)
    parser.add_argument("--old-rev", default=OLD_REV, help="git revision of the old engine (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: the usable CPUs)")
    parser.add_argument("--results", type=Path, default=None, help="also write the figures here (JSON)")
    parser.add_argument("--worker", nargs=2, metavar=("ENGINE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.threads)
        return

    engines = args.engines
    old_tree = extract(args.old_rev) if "old" in engines else None
    print(f"{'N':>4} {'engine':>8} {'wall s':>8} {'cpu s':>8} {'tokens':>7} {'tok/s':>8} {'reused/req':>10}")
    figures: dict[str, dict] = {}
    for n in args.sizes:
        runs = alternating_rounds(engines, args.rounds, lambda name: measure(name, n, args.threads, old_tree))  # noqa: B023
        wall = {name: statistics.median(x["wall"] for x in runs[name]) for name in engines}
        cpu = {name: statistics.median(x["cpu"] for x in runs[name]) for name in engines}
        for name in engines:
            last = runs[name][-1]
            print(
                f"{n:>4} {name:>8} {wall[name]:>8.2f} {cpu[name]:>8.2f} {last['tokens']:>7} "
                f"{last['tokens'] / wall[name]:>8.1f} {last['reused']:>10.1f}",
                flush=True,
            )
        figures[str(n)] = {
            name: {"wall_s": round(wall[name], 3), "cpu_s": round(cpu[name], 3), "tokens": runs[name][-1]["tokens"]}
            for name in engines
        }
        for name in engines:
            if name != "batched" and "batched" in engines:
                figures[str(n)][f"{name}_over_batched"] = {
                    "wall": round(wall[name] / wall["batched"], 2),
                    "cpu": round(cpu[name] / cpu["batched"], 2),
                }
                print(
                    f"{n:>4} {'ratio':>8} {wall[name] / wall['batched']:>7.1f}x {cpu[name] / cpu['batched']:>7.1f}x"
                    f"  ({name} / batched)",
                    flush=True,
                )
    if args.results:
        configuration = {k: v for k, v in vars(args).items() if k not in ("results", "worker")}
        results = {**run_metadata("python " + public_argv(sys.argv), configuration), "requests": figures}
        args.results.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
