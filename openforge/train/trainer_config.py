"""The trainers' settings, without torch: `SFTConfig` (`sft.SFTTrainer`), `GRPOConfig` (`grpo.GRPOTrainer`) and
`LoRASettings` (`lora.py`: what both train when set).

A training run's `sft:` and `rl:` blocks (`openforge.train.config`) extend them, so each knob is declared once,
with one default, whether a trainer is built in Python or from a run's YAML.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SFTOptimization(BaseModel):
    """How SFT steps: AdamW at `lr` (`weight_decay`) on batches of `batch_size` samples, gradients clipped to
    `max_grad_norm` (None: not clipped), micro-batches of at most `max_tokens_per_micro_batch` tokens (memory
    only: the result is the full batch's). Learning-rate schedule: linear warm-up over `warmup_steps`, then
    constant or cosine decay to 0 — a tiny random-init model forms its copy (induction) circuits only with
    warm-up and decay (docs/design.md, "Training the tiny model")."""

    model_config = ConfigDict(extra="forbid")

    lr: float = Field(default=1e-3, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    batch_size: int = Field(default=16, ge=1)
    max_grad_norm: float | None = Field(default=1.0, gt=0)
    max_tokens_per_micro_batch: int | None = Field(default=None, ge=1)
    warmup_steps: int = Field(default=10, ge=0)
    schedule: Literal["constant", "cosine"] = "cosine"


class SFTConfig(SFTOptimization):
    """The SFT trainer's settings: the optimisation, how long — `epochs` (passes over the samples) or `steps`
    (optimizer steps), exactly one — and the `seed` of the batch order."""

    epochs: int | None = Field(default=None, ge=1)
    steps: int | None = Field(default=None, ge=1)
    seed: int = 0

    @model_validator(mode="after")
    def _one_length(self) -> SFTConfig:
        if (self.epochs is None) == (self.steps is None):
            raise ValueError("set exactly one of epochs and steps")
        return self


class GRPOConfig(BaseModel):
    """One GRPO update: AdamW at `lr`, the clipped surrogate (`clip_low` / `clip_high`, veRL's dual-clip bound
    `clip_ratio_c`, None = off), advantages normalised by the group's std (`norm_by_std`, `eps`). `temperature`:
    what the rollouts were sampled at, used when a sample's metadata names none. `max_staleness`,
    `importance_cap`: off-policy groups (below)."""

    model_config = ConfigDict(extra="forbid")

    lr: float = Field(default=2e-4, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    clip_low: float = Field(default=0.2, ge=0)
    clip_high: float = Field(default=0.2, ge=0)
    clip_ratio_c: float | None = Field(default=3.0, gt=1)
    norm_by_std: bool = True
    eps: float = Field(default=1e-6, gt=0)
    temperature: float = Field(default=1.0, gt=0)
    max_grad_norm: float | None = Field(default=1.0, gt=0)
    max_tokens_per_micro_batch: int | None = Field(default=None, ge=1)
    # Asynchronous GRPO (docs/design.md, "Asynchronous GRPO"): a group is trained only if every call in it was
    # sampled by a policy at most `max_staleness` versions older than the one being updated (older groups are
    # dropped and counted); with max_staleness > 0 the loss is decoupled PPO's — clipped against the proximal
    # policy (the current one before the update), times min(π_prox / π_behav, `importance_cap`). 0: synchronous
    # GRPO, the clipped loss against the behaviour logprobs.
    max_staleness: int = Field(default=0, ge=0)
    importance_cap: float = Field(default=2.0, ge=1.0)

    def grpo_config(self) -> GRPOConfig:
        """These settings alone (of a run's `rl:` block, which extends them)."""
        return GRPOConfig.model_validate(self.model_dump(include=set(GRPOConfig.model_fields)))


class LoRASettings(BaseModel):
    """Train a LoRA adapter (peft) instead of every weight, in SFT and GRPO: rank `rank`, scale `alpha` / `rank`,
    on the linear layers named in `target_modules` (module-name suffixes, peft's matching: `q_proj` matches
    every layer's), `dropout` on the adapter's input. Checkpoints hold the adapter in PEFT's format
    (adapter_config.json, adapter_model.safetensors; `PeftModel.from_pretrained` loads it) and, when asked
    (`save_checkpoint(merged=True)`), the merged weights too — a training run asks for its own checkpoints,
    which it serves and evaluates."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(default=8, ge=1)
    alpha: int = Field(default=16, ge=1)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"], min_length=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)

    @model_validator(mode="after")
    def _names(self) -> LoRASettings:
        blank = [name for name in self.target_modules if not name.strip()]
        if blank:
            raise ValueError("lora.target_modules holds an empty name: list module names such as q_proj, v_proj")
        return self
