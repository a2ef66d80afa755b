"""How the constant prompt in front of the task changes whether SFT of the tiny model generalises.

SFT on oracle demonstrations of the quickstart's families (the response is exactly the tool call the react
harness would record), then greedy held-out pass@1, sampled pass@1 and best-of-8 straight from the model
(transformers' generate; no proxy). Prompt variants, rendered by the tiny model's own chat template:

    default     react's default system prompt + the bash tool
    quickstart  the bash tool only, no system prompt (what the quickstart sends)
    none        the task alone, no system turn

or `--prompt-from RUN_STORE`: the first call a real harness sent in a recorded episode (e.g. the `harnesses`
recipe's teacher, `RUNS/.../teacher`), decoded by the proxy's own dialect, with its task replaced by each
instance's and the harness's own shell tool in the response — how SFT fares behind that harness's prompt.

    python benchmarks/sft_prompt.py --prompt quickstart --steps 800 --seed 0
    python benchmarks/sft_prompt.py --prompt default --steps 400
    python benchmarks/sft_prompt.py --prompt-from runs/quickstart-harnesses/teacher --demos 300

Not a test: no assertions, only figures. One variant takes 2–4 minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import torch

from openforge.core import Conversation, Message, Sample, ToolSpec
from openforge.harness.react_agent import SYSTEM_PROMPT, select_tools
from openforge.models import ModelDir, build_tiny_model
from openforge.tasks import QUICKSTART_FAMILIES, InstanceSampler
from openforge.train.data import HELDOUT_SEED, TEACHER_SEED
from openforge.train.quickstart import QUICKSTART
from openforge.train.sft import SFTConfig, SFTTrainer

SFT = QUICKSTART["sft"]  # the quickstart's SFT settings are the defaults here


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", choices=["default", "quickstart", "none"], default="quickstart")
    parser.add_argument(
        "--prompt-from",
        type=Path,
        default=None,
        help="a run's store: its first recorded call is the prompt (the task replaced)",
    )
    parser.add_argument(
        "--mix",
        type=int,
        default=0,
        help="with --prompt-from: also this many demonstrations behind the quickstart's prompt "
        "(the react harness), trained together; held out is measured behind --prompt-from's",
    )
    parser.add_argument("--demos", type=int, default=400)
    parser.add_argument("--steps", type=int, default=SFT["steps"])
    parser.add_argument("--lr", type=float, default=SFT["lr"])
    parser.add_argument("--warmup", type=int, default=SFT["warmup_steps"])
    parser.add_argument("--batch", type=int, default=SFT["batch_size"])
    parser.add_argument("--seed", type=int, default=0, help="demonstrations and their order")
    parser.add_argument("--model-seed", type=int, default=0)
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="start from this model directory (same tokenizer) instead of a fresh tiny model",
    )
    parser.add_argument(
        "--eval", type=int, default=QUICKSTART["rl"]["eval_instances"], help="held-out instances (greedy)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-every", type=int, default=0, help="also greedy held-out pass@1 every N steps")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    md = ModelDir(
        args.model or build_tiny_model(tempfile.mkdtemp(prefix="openforge-sft-prompt-"), seed=args.model_seed)
    )
    model = md.load_model()
    bash = select_tools(["bash"])[0]["function"]
    bash_tool = [ToolSpec(name=bash["name"], description=bash["description"], parameters=bash["parameters"])]

    def render(instruction: str, system: str | None, tools: list[ToolSpec]) -> list[int]:
        return md.render(Conversation(system=system, tools=tools, messages=[Message(role="user", content=instruction)]))

    def react(instruction: str) -> list[int]:  # the quickstart's prompt: the bash tool, no system prompt
        return render(instruction, None, bash_tool)

    shell, argument = "bash", "command"
    if args.prompt_from is not None:
        template, task_text, (shell, argument) = recorded_prompt(args.prompt_from)

        def prompt(instruction: str) -> list[int]:
            return md.render(
                template.model_copy(
                    update={
                        "messages": [
                            m.model_copy(update={"content": m.content.replace(task_text, instruction)})
                            for m in template.messages
                        ]
                    }
                )
            )
    else:

        def prompt(instruction: str) -> list[int]:
            return render(
                instruction,
                SYSTEM_PROMPT if args.prompt == "default" else None,
                [] if args.prompt == "none" else bash_tool,
            )

    def demonstrations(seed: int, n: int, render_prompt, name: str, key: str) -> list[Sample]:
        """The sample the assembler makes of a one-call teacher episode: loss on the tool call only."""
        out = []
        for x in InstanceSampler("train", seed=seed, families=QUICKSTART_FAMILIES).sample(n):
            call = json.dumps({"name": name, "arguments": {key: x.solution_command}})
            p, r = render_prompt(x.instruction), md.encode_completion(f"<tool_call>\n{call}\n</tool_call><|im_end|>")
            out.append(
                Sample(
                    token_ids=p + r,
                    loss_mask=[0] * len(p) + [1] * len(r),
                    logprobs=[0.0] * (len(p) + len(r)),
                    reward=1.0,
                    group_id="sft",
                    episode_id=x.key,
                    prompt_length=len(p),
                )
            )
        return out

    samples = demonstrations(TEACHER_SEED + args.seed, args.demos, prompt, shell, argument)
    if args.mix:  # other instances, behind react's short prompt with react's bash tool
        samples += demonstrations(TEACHER_SEED + args.seed + 1, args.mix, react, "bash", "command")
    heldout = InstanceSampler("heldout", seed=HELDOUT_SEED, families=QUICKSTART_FAMILIES).sample(args.eval)
    curve: list[tuple[int, float]] = []

    def scores(instances, k: int = 1) -> list[float]:
        model.eval()  # the trainer leaves it in train mode
        out_scores = []
        for i in range(0, len(instances), 50):
            chunk = instances[i : i + 50]
            ids = [prompt(x.instruction) for x in chunk]
            width = max(map(len, ids))
            inputs = torch.tensor([[md.pad_token_id] * (width - len(x)) + x for x in ids])
            attention = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
            with torch.no_grad():
                out = model.generate(
                    input_ids=inputs,
                    attention_mask=attention,
                    max_new_tokens=64,
                    do_sample=k > 1,
                    temperature=1.0 if k > 1 else None,
                    top_k=0 if k > 1 else None,
                    num_return_sequences=k,
                    pad_token_id=md.pad_token_id,
                    eos_token_id=md.eos_token_ids,
                )
            for instance, row in zip([x for x in chunk for _ in range(k)], out):
                found = re.search(rf'"{argument}": "(.*?)"}}}}', md.decode(row[width:].tolist()))
                try:
                    command = json.loads(f'"{found.group(1)}"') if found else None
                except ValueError:
                    command = None
                out_scores.append(instance.score(command) if command else 0.0)
        return out_scores

    # the quickstart's SFT: the same trainer, schedule and batch
    trainer = SFTTrainer(
        model,
        SFTConfig(
            lr=args.lr,
            batch_size=args.batch,
            steps=args.steps,
            warmup_steps=args.warmup,
            schedule=SFT["schedule"],
            seed=args.seed,
        ),
        pad_id=md.pad_token_id,
    )

    def on_step(step: int, loss: float) -> None:
        if step % 100 == 1 or step == args.steps:
            print(f"step {step} loss {loss:.3f} ({time.monotonic() - started:.0f} s)", flush=True)
        if args.eval_every and step % args.eval_every == 0 and step < args.steps:
            curve.append((step, sum(scores(heldout)) / len(heldout)))
            print(f"step {step}: held-out greedy {100 * curve[-1][1]:.1f}%", flush=True)

    started = time.monotonic()
    trainer.train(samples, on_step=on_step)
    train_s = round(time.monotonic() - started)

    greedy = scores(heldout)
    best_of = min(48, len(heldout))  # instances sampled 8 times
    sampled = scores(heldout[:best_of], k=8)
    best_of_8 = sum(max(sampled[i * 8 : (i + 1) * 8]) for i in range(best_of)) / best_of
    print(
        json.dumps(
            {
                "prompt": str(args.prompt_from or args.prompt),
                "prompt_tokens": len(prompt(heldout[0].instruction)),
                "demos": args.demos,
                "mix": args.mix,
                "steps": args.steps,
                "seed": args.seed,
                "train_s": train_s,
                "final_loss": round(trainer.losses[-1], 4),
                "heldout_greedy": sum(greedy) / len(greedy),
                "heldout_sampled": sum(sampled) / len(sampled),
                "heldout_best_of_8": best_of_8,
                "curve": curve,
            }
        )
    )


def recorded_prompt(store_dir: Path) -> tuple[Conversation, str, tuple[str, str]]:
    """(the first call of the store's first episode as the proxy decoded it, its task's instruction, the
    harness's shell tool and argument)."""
    from openforge.dialects import DIALECTS
    from openforge.harness import get_adapter
    from openforge.store import TrajectoryStore
    from openforge.tasks import load_tasks

    with TrajectoryStore.open(store_dir) as store:
        episode = store.list_episodes()[0]
        call = store.list_calls(episode.id)[0]
    conversation = DIALECTS[call.dialect].decode(call.request_body).conversation
    task = {t.id: t for t in load_tasks(store_dir.parent / "tasks" / "teacher")}[episode.task]
    return conversation, task.instruction.strip(), get_adapter(episode.harness).shell_tool


if __name__ == "__main__":
    main()
