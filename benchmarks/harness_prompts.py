"""How long each harness's first prompt is in the tiny model's tokenizer, with the harness's own defaults and with
the settings the `harnesses` recipe uses to cut it (`HARNESS_OPTIONS` in openforge/train/quickstart.py): one
oracle episode per (harness, settings) on one generated task, in Docker, through the proxy; the prompt length
is what the proxy recorded for the episode's first call.

    python benchmarks/harness_prompts.py [--results benchmarks/results/harness_prompts.json]

Needs Docker with the offline base image and the harness bundle. Not a test: only figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from _machine import public_argv

from openforge.models import build_tiny_model
from openforge.rollout import run_rollouts
from openforge.rollout.config import RolloutConfig
from openforge.store import TrajectoryStore
from openforge.tasks import DEFAULT_IMAGE_MAP, QUICKSTART_FAMILIES, InstanceSampler, write_task
from openforge.train.quickstart import HARNESS_OPTIONS

HARNESSES = ["claude-code", "codex", "react"]


def first_prompt_tokens(root: Path, model: Path, tasks: Path, harness: str, options: dict) -> int:
    run = root / f"{harness}-{'cut' if options else 'default'}"
    config = RolloutConfig(
        tasks=[tasks],
        model=model,
        backend="oracle",
        run=run,
        harnesses=[harness],
        sandbox="docker",
        max_attempts=1,
        image_map=dict(DEFAULT_IMAGE_MAP),
        harness_options={harness: options} if options else {},
    )
    asyncio.run(run_rollouts(config))
    with TrajectoryStore.open(run) as store:
        episode = store.list_episodes()[0]
        return len(store.list_calls(episode.id)[0].prompt_ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/harness_prompts.json"))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="openforge-harness-prompts-"))
    model = build_tiny_model(root / "model")
    instance = InstanceSampler("train", seed=0, families=QUICKSTART_FAMILIES).sample(1)[0]
    write_task(instance, root / "tasks" / instance.task_id())
    figures = {
        h: {
            "default": first_prompt_tokens(root, model, root / "tasks", h, {}),
            "cut": first_prompt_tokens(root, model, root / "tasks", h, HARNESS_OPTIONS[h]),
            "settings": HARNESS_OPTIONS[h],
        }
        for h in HARNESSES
    }
    for harness, f in figures.items():
        print(f"{harness}: first prompt {f['default']} tokens with its defaults, {f['cut']} with the recipe's settings")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(
        json.dumps(
            {"command": "python " + public_argv(sys.argv), "task": instance.task_id(), "first_prompt_tokens": figures},
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
