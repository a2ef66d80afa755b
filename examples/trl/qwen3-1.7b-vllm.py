"""The TRL example's setup for a real model on one GPU: Qwen3-1.7B, TRL's vLLM server, Docker sandboxes.

**Not run here** (no GPU was available to this work): the settings are TRL 1.16's and OpenForge's documented
options, checked only by reading; expect to tune memory and batch sizes. What it does: each GRPO step draws
`PROMPTS` tasks, runs a group of `GROUP` episodes per task through the chosen harness, each episode in its own
Docker container against the recording proxy, whose model calls go to TRL's vLLM server; TRL pushes the
trainer's weights into that server before each batch (`use_vllm=True, vllm_mode="server"`), and the proxy
records the trainer's step as the policy version of every call.

    # on the GPU machine, with the repository installed: pip install -c constraints.txt -e ".[trl,docker]" vllm
    # (vLLM brings its own torch and CUDA; TRL 1.16 runs `vllm serve` with processed logprobs)
    CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model /models/Qwen3-1.7B --gpu-memory-utilization 0.35 &
    python examples/trl/qwen3-1.7b-vllm.py --tasks examples/tasks --model /models/Qwen3-1.7B

One GPU holds both: the vLLM server (`--gpu-memory-utilization 0.35`) and the trainer (bf16, gradient
checkpointing). The model must be a local directory: the proxy renders and tokenizes with its chat template.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from openforge.integrations.trl import OpenForgeRollout, openforge_reward, task_dataset  # noqa: E402
from openforge.rollout import RolloutConfig  # noqa: E402
from openforge.tasks import load_tasks  # noqa: E402

PROMPTS, GROUP = 4, 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, required=True, help="task directories (Harbor layout)")
    parser.add_argument("--model", type=Path, required=True, help="the policy's local model directory")
    parser.add_argument("--harness", default="react", help="react, claude-code, codex or openclaw")
    parser.add_argument("--vllm", default="http://127.0.0.1:8000", help="TRL's vLLM server")
    parser.add_argument("--run", type=Path, default=Path("runs/trl-qwen3-1.7b"))
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    config = RolloutConfig(
        tasks=[args.tasks],
        split="train",
        harnesses=[args.harness],
        sandbox="docker",
        model=args.model,
        backend=f"vllm:{args.vllm}",
        run=args.run,
        max_new_tokens=4096,
        concurrency=16,
        warm_sandboxes=8,
    )
    grpo = GRPOConfig(
        output_dir=str(args.run / "trainer"),
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=args.vllm,
        # one generation batch = PROMPTS groups of GROUP episodes (TRL generates once per optimizer step)
        per_device_train_batch_size=GROUP,
        gradient_accumulation_steps=PROMPTS,
        num_generations=GROUP,
        max_steps=args.steps,
        learning_rate=1e-6,
        temperature=1.0,
        bf16=True,
        gradient_checkpointing=True,
        loss_type="dapo",
        logging_steps=1,
        save_steps=50,
    )
    task_ids = [t.id for t in load_tasks([args.tasks], split="train")]
    with OpenForgeRollout(config) as rollout:
        trainer = GRPOTrainer(
            model=str(args.model),
            reward_funcs=openforge_reward,
            args=grpo,
            train_dataset=task_dataset(task_ids),
            rollout_func=rollout,
        )
        trainer.train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
