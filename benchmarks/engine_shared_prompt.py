"""The embedded engine on a real model: 8 concurrent episodes behind a shared 2,000-token prompt.

The workload of a GRPO group or of a harness's episodes on SmolLM2-135M-Instruct: N requests, each the same
PROMPT-token prefix (the harness's system prompt and tools) and its own ~20-token task, sampled at temperature
0.7 with max_tokens 64 (a request may stop earlier at the end-of-sequence token; the same seeds give the same
tokens in every variant, up to rounding). A warm-up request reads the shared prompt first, so the N requests
find it in the prefix cache (prefix reuse); the figure is the generated tokens of the N requests per second of
wall time, their own suffixes' reading included.

Variants, each in a fresh process, rounds alternating (read the ratios: the machine may be shared):

  plain    the engine's defaults: torch's linear layers (MKL), every row's cache holds the shared prompt
  onednn   linear layers through oneDNN with weights packed once (`openforge/inference/cpu_linear.py`)
  cascade  the decode batch keeps the shared prefix once (`openforge/inference/cascade.py`)
  both     onednn + cascade

Both are backend options (`backend_options: {cascade_attention: true, onednn_linears: true}`), off by default.

    openforge model get smollm2-135m runs/smollm2
    python benchmarks/engine_shared_prompt.py --model runs/smollm2 --rounds 3 \
        --results benchmarks/results/engine-shared-prompt.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from _machine import write_results
from _rounds import alternating_rounds, worker_figures

from openforge.core import SamplingParams
from openforge.inference import make_backend
from openforge.inference.base import GenerationContext
from openforge.models import ModelDir

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {
    "plain": {"onednn_linears": False, "cascade_attention": False},
    "onednn": {"onednn_linears": True, "cascade_attention": False},
    "cascade": {"onednn_linears": False, "cascade_attention": True},
    "both": {"onednn_linears": True, "cascade_attention": True},
    "bf16": {"bf16_linears": True, "cascade_attention": True},
}
MAX_TOKENS = 64


def workload(model: ModelDir, episodes: int, prompt_tokens: int) -> tuple[list[int], list[list[int]]]:
    """(the shared prefix, one prompt per episode: the prefix and its own task)."""
    text = (REPO / "docs" / "design.md").read_text()
    prefix = model.encode_text(text)[:prompt_tokens]
    assert len(prefix) == prompt_tokens, f"docs/design.md is shorter than {prompt_tokens} tokens"
    tasks = [
        model.encode_text(f"\n\nTask {i}: append the line 'k{i}=v{i * 7}' to /app/conf{i}.ini, then explain why.")
        for i in range(episodes)
    ]
    return prefix, [prefix + t for t in tasks]


async def measure(model: ModelDir, episodes: int, prompt_tokens: int, threads: int | None, options: dict) -> dict:
    backend = make_backend("embedded", model, max_batch=64, seed=0, num_threads=threads, **options)
    prefix, prompts = workload(model, episodes, prompt_tokens)
    sampling = [SamplingParams(temperature=0.7, max_tokens=MAX_TOKENS, seed=i) for i in range(episodes)]
    try:
        t0 = time.perf_counter()
        await backend.generate(prefix, SamplingParams(max_tokens=1, seed=0), GenerationContext(episode_id="warm"))
        warm_up = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        results = await asyncio.gather(
            *(
                backend.generate(p, s, GenerationContext(episode_id=f"e{i}"))
                for i, (p, s) in enumerate(zip(prompts, sampling))
            )
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        await backend.close()
    tokens = sum(len(r.output_ids) for r in results)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "tokens": tokens,
        "tok_per_s": tokens / wall,
        "prompt_read_s": warm_up,
        "reused_per_request": statistics.mean(r.timings["prompt_tokens_reused"] for r in results),
        "outputs": [r.output_ids for r in results],
    }


def worker(args: argparse.Namespace) -> None:
    model = ModelDir(args.model)
    figures = asyncio.run(measure(model, args.episodes, args.prompt_tokens, args.threads, VARIANTS[args.worker]))
    print(json.dumps(figures))


def run_variant(args: argparse.Namespace, variant: str) -> dict:
    command = [
        sys.executable,
        __file__,
        "--worker",
        variant,
        "--model",
        str(args.model),
        "--episodes",
        str(args.episodes),
        "--prompt-tokens",
        str(args.prompt_tokens),
    ] + (["--threads", str(args.threads)] if args.threads else [])
    return worker_figures(command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Path("runs/smollm2"))
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=2000)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: the usable CPUs)")
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument("--worker", choices=list(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    def report(r: int, variant: str, got: dict) -> None:
        print(
            f"round {r + 1} {variant:>8}: {got['tokens']} tokens in {got['wall_s']:.2f} s = "
            f"{got['tok_per_s']:.1f} tok/s (CPU {got['cpu_s']:.1f} s)",
            flush=True,
        )

    runs = alternating_rounds(args.variants, args.rounds, lambda variant: run_variant(args, variant), report)
    baseline = args.variants[0]
    summary = {}
    for variant, got in runs.items():
        rate = statistics.median(g["tok_per_s"] for g in got)
        summary[variant] = {
            "tok_per_s_median": round(rate, 1),
            "tok_per_s": [round(g["tok_per_s"], 1) for g in got],
            "wall_s": [round(g["wall_s"], 2) for g in got],
            "tokens": [g["tokens"] for g in got],
            "prompt_read_s": [round(g["prompt_read_s"], 2) for g in got],
            "reused_per_request": got[-1]["reused_per_request"],
            f"over_{baseline}": round(rate / statistics.median(g["tok_per_s"] for g in runs[baseline]), 2),
        }
        print(f"{variant:>8}: median {rate:.1f} tok/s, {summary[variant][f'over_{baseline}']}x {baseline}")
    same = {v: all(g["outputs"] == runs[baseline][0]["outputs"] for g in got) for v, got in runs.items()}
    print("same tokens as", baseline, same)
    if args.results:
        configuration = {k: str(v) for k, v in vars(args).items() if k not in ("results", "worker")}
        write_results(
            args.results,
            "python benchmarks/engine_shared_prompt.py",
            configuration,
            variants=summary,
            same_tokens_as_baseline=same,
        )


if __name__ == "__main__":
    main()
