"""Helpers for the trainer tests (no tests here): synthetic samples shaped like the assembler's, behaviour
logprobs from a forward pass, and per-sample logprob sums."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from openforge.core.records import Sample
from openforge.train.batching import collate
from openforge.train.losses import token_logprobs


def make_sample(
    rng: random.Random,
    group: str,
    reward: float,
    length: int = 24,
    prompt: int = 8,
    tool_turn: tuple[int, int] | None = None,
    vocab: tuple[int, int] = (10, 900),
    temperature: float | None = None,
) -> Sample:
    """A sample of `length` random tokens: `prompt` context tokens (mask 0), then sampled ones (mask 1), with
    an optional tool-result span [a, b) in mask 0 (a multi-turn sample)."""
    ids = [rng.randrange(*vocab) for _ in range(length)]
    mask = [0] * prompt + [1] * (length - prompt)
    if tool_turn is not None:
        for t in range(*tool_turn):
            mask[t] = 0
    metadata = {"temperature": temperature} if temperature is not None else {}
    return Sample(
        token_ids=ids,
        loss_mask=mask,
        logprobs=[0.0] * length,
        reward=reward,
        group_id=group,
        episode_id=f"ep-{group}-{rng.randrange(10**9)}",
        prompt_length=prompt,
        metadata=metadata,
    )


def with_behaviour_logprobs(model, samples: list[Sample], temperature: float = 1.0) -> list[Sample]:
    """The samples with `logprobs` = what a backend sampling from `model` would have recorded (at each
    sample's temperature: metadata's, else `temperature`), 0.0 where the mask is 0."""
    batch = collate(samples, default_temperature=temperature)
    with torch.no_grad():
        lp = token_logprobs(model, batch)
    out = []
    for row, s in enumerate(samples):
        values = lp[row, : len(s.token_ids)].tolist()
        out.append(s.model_copy(update={"logprobs": [v if m else 0.0 for v, m in zip(values, s.loss_mask)]}))
    return out


def trained_logprob_sums(model, samples: list[Sample], temperature: float = 1.0) -> torch.Tensor:
    """Per sample: the sum of log p over its trained tokens under `model`."""
    batch = collate(samples, default_temperature=temperature)
    with torch.no_grad():
        return (token_logprobs(model, batch) * batch.loss_mask).sum(dim=1)


def family_run_config(tmp_path, tiny_model_dir, **rl) -> dict:
    """A small training run (TrainConfig fields) on the create_file family, react in process, in the local
    sandbox: `rl` lays fields over its GRPO settings (4 steps of 2 prompts x 2)."""
    return {
        "run": str(tmp_path / "run"),
        "model": str(tiny_model_dir),
        "tasks": {"families": ["create_file"]},
        "sandbox": "local",
        "validate_tasks": False,
        "max_new_tokens": 16,
        "harness_options": {"react": {"max_steps": 1, "tools": ["bash"]}},
        "rl": {"steps": 4, "prompts": 2, "group": 2, "eval_every": 10, "eval_instances": 2, **rl},
    }


def prefix_samples(prefix: list[int], tails: list[list[int]], trained_from: int = 2) -> list[Sample]:
    """One sample per tail: the shared `prefix` then the tail, trained from `trained_from` tokens into the tail;
    temperatures alternate 1.0 / 0.7."""
    out = []
    for i, tail in enumerate(tails):
        ids = prefix + tail
        mask = [0] * (len(prefix) + trained_from) + [1] * (len(tail) - trained_from)
        out.append(
            Sample(
                episode_id=f"e{i}",
                reward=1.0,
                group_id="g",
                token_ids=ids,
                loss_mask=mask,
                logprobs=[0.0] * len(ids),
                metadata={"temperature": 0.7 if i % 2 else 1.0},
            )
        )
    return out


def parameter_grads(model) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def cpu_vendor() -> str:
    """The CPU's vendor (`GenuineIntel`, `AuthenticAMD`, ...; empty where /proc/cpuinfo does not say): vector
    kernels of the same capability round differently across vendors, so a bit-exact fixture records it."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("vendor_id")), "")
