"""What the shared-prefix forward saves in training on harness-shaped samples: one SFT step (forward and
backward over a batch) with the plain forward pass and with the shared prefix computed once
(`openforge.train.shared_prefix`), timed alternately on the same batch. Shapes are those of the real harnesses'
first calls in the tiny model's tokenizer: Claude Code ~3,300 tokens of constant prompt, Codex ~10,800, then
the task and the policy's reply (where the loss is). `mixed` is a batch of the mixed-harness condition: rows
behind react's, Claude Code's and Codex's prompts as the `harnesses` recipe cuts them (37, 299 and 1,815 tokens:
benchmarks/results/harness_prompts.json), interleaved — nothing is common to the whole batch, each prompt is
shared within its rows (`prefix_groups`). `--sliding-window 96` is the recipe's model: only the positions the
trained tokens can see are computed (`receptive_start`).

    python benchmarks/shared_prefix.py [--rows 8] [--repeats 1] [--shapes claude-code codex mixed]
                                       [--sliding-window N]
                                       [--results benchmarks/results/shared_prefix.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from _machine import public_argv

from openforge.core.records import Sample
from openforge.models import ModelDir, TinyModelSpec, build_tiny_model
from openforge.train.batching import collate
from openforge.train.losses import sft_loss, token_logprobs

# constant prompt tokens before the task, one per prompt the batch's rows cycle through
SHAPES = {"claude-code": [3300], "codex": [10800], "mixed": [37, 299, 1815]}
TASK_TOKENS, REPLY_TOKENS = 120, 40


def batch_of(prefix_tokens: list[int], rows: int):
    gen = torch.Generator().manual_seed(0)
    prefixes = [torch.randint(10, 900, (n,), generator=gen).tolist() for n in prefix_tokens]
    samples = []
    for i in range(rows):
        prefix = prefixes[i % len(prefixes)]
        own = torch.randint(10, 900, (TASK_TOKENS + REPLY_TOKENS + i,), generator=gen).tolist()
        mask = [0] * (len(prefix) + TASK_TOKENS) + [1] * (REPLY_TOKENS + i)
        samples.append(
            Sample(
                episode_id=f"e{i}",
                reward=1.0,
                group_id="g",
                token_ids=prefix + own,
                loss_mask=mask,
                logprobs=[0.0] * len(mask),
            )
        )
    return collate(samples, pad_id=0, sampling_temperatures=False)


def step_seconds(model, batch, share: bool) -> float:
    started = time.perf_counter()
    model.zero_grad(set_to_none=True)
    sft_loss(token_logprobs(model, batch, share_prefix=share), batch.loss_mask).backward()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8, help="samples per batch (a GRPO group, an SFT batch)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--sliding-window", type=int, default=None, help="the tiny model's window (default: none)")
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/shared_prefix.json"))
    args = parser.parse_args()
    spec = TinyModelSpec(sliding_window=args.sliding_window)
    model = ModelDir(
        build_tiny_model(Path(tempfile.mkdtemp(prefix="openforge-prefix-")) / "model", spec=spec)
    ).load_model()
    model.train()
    figures = {}
    for harness in args.shapes:
        prefix = SHAPES[harness]
        batch = batch_of(prefix, args.rows)
        seconds: dict[str, list[float]] = {"plain": [], "shared prefix": []}
        for _ in range(args.repeats):
            for variant in seconds:
                seconds[variant].append(step_seconds(model, batch, variant == "shared prefix"))
        medians = {k: round(statistics.median(v), 3) for k, v in seconds.items()}
        figures[harness] = {
            "prefix_tokens": prefix,
            "rows": args.rows,
            "batch_tokens": int(batch.attention_mask.sum()),
            "trained_tokens": batch.num_tokens,
            "median_s": medians,
            "speedup": round(medians["plain"] / medians["shared prefix"], 2),
        }
        print(
            f"{harness}: {args.rows} rows of {'/'.join(map(str, prefix))}+{TASK_TOKENS + REPLY_TOKENS} tokens: plain "
            f"{medians['plain']:.2f} s, shared prefix {medians['shared prefix']:.2f} s "
            f"({figures[harness]['speedup']:.1f}x)"
        )
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(
        json.dumps(
            {
                "command": "python " + public_argv(sys.argv),  # as run (from the repository root or benchmarks/)
                "sliding_window": args.sliding_window,
                "cpus": os.cpu_count(),
                "torch_threads": torch.get_num_threads(),
                "shapes": figures,
                "load_average_at_end": os.getloadavg()[0],
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
