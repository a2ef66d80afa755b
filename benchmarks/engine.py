"""Embedded-engine benchmark: the quickstart's RL workload on the tiny model, batched prefill vs the former schedule.

The workload (one round of RL episodes right after a weight swap, so the prefix cache starts empty): N concurrent
requests, one per episode (`GenerationContext(episode_id=f"e{i}")`), each a shared ~100-token system-prompt
prefix followed by a distinct ~20-token user message, sampled at temperature 1 with max_tokens 48 (the tiny
model may stop earlier at its end-of-sequence token; the same seeds give the same lengths in both engines).

The engines, side by side, each on a fresh backend
(`make_backend("embedded", model_dir, max_batch=128, prefix_cache_entries=512, seed=0)`):

  batched   the current engine: short prompts read together in one forward pass, the shared prefix reused
            across episodes as soon as one prompt holding it has been read, one decode-batch rebuild per turn
  former    the same with `batched_prefill=False`: one prompt per engine turn (each interleaved with a decode
            step), each job joining the decode batch on its own, caches kept only when a call ends (the
            schedule before batched prefill)

Printed per N: wall seconds of `asyncio.gather` over the N `backend.generate` calls (backend construction not
counted), the process's CPU seconds meanwhile (all threads), generated tokens per second (by wall time), and
the former/batched ratios of wall and CPU time. The rounds interleave the engines (a
warm-up of both first, not counted) and the median wall time is reported: the machine may be shared and noisy,
so read the ratios, not the absolute figures.

    .venv/bin/python benchmarks/engine.py [--sizes 16 64 128] [--rounds 1] [--no-former] [--threads T]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from openforge.core import SamplingParams
from openforge.inference import make_backend
from openforge.inference.base import GenerationContext
from openforge.models import ModelDir, build_tiny_model

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
    model: ModelDir, prompts: list[list[int]], batched: bool, threads: int | None
) -> tuple[float, float, int, float]:
    """(wall seconds, CPU seconds, generated tokens, mean prompt tokens reused) for all prompts at once, on a
    fresh backend."""
    backend = make_backend(
        "embedded", model, max_batch=128, prefix_cache_entries=512, seed=0, num_threads=threads,
        batched_prefill=batched,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-former", action="store_true", help="measure the batched engine only")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: the usable CPUs)")
    args = parser.parse_args()

    model = ModelDir(build_tiny_model(Path(tempfile.mkdtemp(prefix="openforge-bench-engine-")) / "tiny", seed=0))
    engines = ["batched"] if args.no_former else ["batched", "former"]
    warm = workload(model, 4)
    for name in engines:  # warm-up: first-call costs (threads, kernels) not counted
        asyncio.run(run_once(model, warm, name == "batched", args.threads))

    print(f"{'N':>4} {'engine':>8} {'wall s':>8} {'cpu s':>8} {'tokens':>7} {'tok/s':>8} {'reused/req':>10}")
    for n in args.sizes:
        prompts = workload(model, n)
        walls: dict[str, list[float]] = {name: [] for name in engines}
        cpus: dict[str, list[float]] = {name: [] for name in engines}
        figures: dict[str, tuple[int, float]] = {}
        for r in range(args.rounds):
            order = engines if r % 2 == 0 else engines[::-1]
            for name in order:
                wall, cpu, tokens, reused = asyncio.run(run_once(model, prompts, name == "batched", args.threads))
                walls[name].append(wall)
                cpus[name].append(cpu)
                figures[name] = (tokens, reused)
        for name in engines:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            tokens, reused = figures[name]
            print(
                f"{n:>4} {name:>8} {wall:>8.2f} {cpu:>8.2f} {tokens:>7} {tokens / wall:>8.1f} {reused:>10.1f}",
                flush=True,
            )
        if "former" in walls:
            ratio = statistics.median(walls["former"]) / statistics.median(walls["batched"])
            cpu_ratio = statistics.median(cpus["former"]) / statistics.median(cpus["batched"])
            print(f"{n:>4} {'ratio':>8} {ratio:>7.1f}x {cpu_ratio:>7.1f}x  (former / batched)", flush=True)


if __name__ == "__main__":
    main()
