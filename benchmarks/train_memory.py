"""Peak memory and time of one SFT step on a real model: the whole logits against blocks of positions
(`openforge/train/vocab_blocks.py`), with and without activation checkpointing (`activation_checkpointing`),
full fine-tuning against LoRA.

Each variant runs in its own process (peak RSS is per process): load the model, then STEPS optimizer steps
(`train.sft.sft_step`, AdamW) on ROWS rows of TOKENS tokens each (the first PROMPT untrained, the rest trained,
random token ids, no shared prefix). Per variant: the process's peak resident memory (`ru_maxrss`), its memory
after loading the model, and the median seconds of a step after the first.

    openforge model get smollm2-135m runs/smollm2
    python benchmarks/train_memory.py --model runs/smollm2 --json benchmarks/results/train-memory-smollm2.json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _machine import public_argv, run_metadata

VARIANTS = {
    "full, whole logits": {"lora": False, "blocks": False, "checkpointing": False},
    "full, blocks": {"lora": False, "blocks": True, "checkpointing": False},
    "full, blocks, checkpointing": {"lora": False, "blocks": True, "checkpointing": True},
    "LoRA, whole logits": {"lora": True, "blocks": False, "checkpointing": False},
    "LoRA, blocks": {"lora": True, "blocks": True, "checkpointing": False},
    "LoRA, blocks, checkpointing": {"lora": True, "blocks": True, "checkpointing": True},
}
LORA = {"rank": 16, "alpha": 32, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"]}


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)  # KiB on Linux


def one_variant(
    model_dir: Path, lora: bool, blocks: bool, checkpointing: bool, rows: int, tokens: int, prompt: int, steps: int
) -> dict:
    import torch

    from openforge.core.records import Sample
    from openforge.train import vocab_blocks
    from openforge.train.lora import trainable_model, trainable_parameters
    from openforge.train.sft import sft_step
    from openforge.train.trainer_config import LoRASettings

    torch.manual_seed(0)
    if not blocks:
        vocab_blocks.LOGITS_BUDGET = 1 << 62  # never blocked: the whole logits, as before
    model = trainable_model(model_dir, LoRASettings(**LORA) if lora else None, activation_checkpointing=checkpointing)
    loaded = peak_gib()
    vocab = model.config.vocab_size
    samples = [
        Sample(
            episode_id=f"e{i}",
            reward=1.0,
            group_id="g",
            token_ids=torch.randint(10, vocab, (tokens,)).tolist(),
            loss_mask=[0] * prompt + [1] * (tokens - prompt),
            logprobs=[0.0] * tokens,
        )
        for i in range(rows)
    ]
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=1e-5)
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        sft_step(model, optimizer, samples)
        seconds.append(time.perf_counter() - start)
    return {
        "peak_rss_gib": round(peak_gib(), 2),
        "after_load_gib": round(loaded, 2),
        "step_s": [round(s, 2) for s in seconds],
        "median_step_s": round(statistics.median(seconds[1:] or seconds), 2),
        "blocked": vocab_blocks.OutputHead(model, rows, tokens).blocked,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a model directory (openforge model get ...)")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--prompt", type=int, default=100, help="untrained leading tokens of each row")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--one", choices=list(VARIANTS), help=argparse.SUPPRESS)  # a child process: one variant
    args = parser.parse_args()
    shape = (args.rows, args.tokens, args.prompt, args.steps)
    if args.one:
        rows, tokens, prompt, steps = shape
        print(
            json.dumps(
                one_variant(args.model, **VARIANTS[args.one], rows=rows, tokens=tokens, prompt=prompt, steps=steps)
            )
        )
        return
    command = "python benchmarks/train_memory.py " + public_argv(sys.argv[1:])
    results = {
        **run_metadata(command, {"rows": args.rows, "tokens": args.tokens, "prompt": args.prompt, "lora": LORA}),
        "model": json.loads((args.model / "config.json").read_text()).get("_model_name_or_path") or args.model.name,
        "variants": {},
    }
    for name in VARIANTS:
        child = [sys.executable, __file__, *sys.argv[1:], "--one", name]
        child = [c for i, c in enumerate(child) if not (c == "--json" or (i and child[i - 1] == "--json"))]
        done = subprocess.run(child, capture_output=True, text=True, check=True)
        results["variants"][name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{name:22} peak {results['variants'][name]['peak_rss_gib']:5.2f} GiB, "
            f"step {results['variants'][name]['median_step_s']:6.2f} s",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
