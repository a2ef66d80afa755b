"""Checkpoints: a complete Hugging Face model directory plus a sidecar with what resuming needs.

    out_dir/
      config.json, model.safetensors, generation_config.json     the trained weights (transformers writes them)
      tokenizer.json, tokenizer_config.json, chat_template.jinja, special_tokens_map.json   copied from the base
      trainer_state.pt      optimizer state, step, RNG states (torch.load(weights_only=True) can read it)
      trainer_state.json    step and notes, readable without torch

A LoRA model (peft) writes its adapter in PEFT's own format instead, into out_dir/adapter/
(adapter_config.json, adapter_model.safetensors: `PeftModel.from_pretrained(base, out_dir / "adapter")` loads
it), and with `merged=True` the merged weights at the top (config.json, model.safetensors: a model directory
again). `lora.py` says why the adapter has a directory of its own.

Such a directory is what `openforge proxy --model`, `ModelDir`, the embedded backend's weight swap and vLLM
load. It is written into a temporary sibling and renamed into place, so a crash mid-save never leaves a
half-written checkpoint where a resume would look.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from openforge.core.errors import ModelError
from openforge.models import ModelDir

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from openforge.train.lora import Policy

TRAINER_STATE = "trainer_state.pt"
TRAINER_STATE_JSON = "trainer_state.json"
# Files that make a model directory servable besides the weights; the tokenizer and template come from the
# base model, never re-derived, so the trained model renders and tokenizes exactly as the one that sampled.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
    "generation_config.json",
)
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


class CheckpointError(ModelError, ValueError):
    """A checkpoint cannot be written or read; the message says what is missing."""


@dataclass
class TrainerState:
    step: int = 0
    optimizer: dict[str, Any] | None = None
    rng: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def _template_path(model_dir_template: ModelDir | str | Path) -> Path:
    path = model_dir_template.path if isinstance(model_dir_template, ModelDir) else Path(model_dir_template)
    if not (path / "tokenizer.json").is_file():
        raise CheckpointError(f"{path} is not a model directory (no tokenizer.json to copy)")
    return path


def save_checkpoint(
    model: Policy,
    model_dir_template: ModelDir | str | Path,
    out_dir: str | Path,
    optimizer: torch.optim.Optimizer | None = None,
    step: int = 0,
    extra: dict[str, Any] | None = None,
    merged: bool = False,
) -> Path:
    """Write `model` as a model directory at `out_dir` (replacing one already there), tokenizer files from
    `model_dir_template`, and the trainer state. `extra`: small JSON-able notes (run id, metrics). A LoRA model:
    its adapter, and with `merged` the merged weights too (the module docstring)."""
    from openforge.train.lora import adapter_dir, is_peft, merged_model

    template = _template_path(model_dir_template)
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; a server running as another user must read the checkpoint
    try:
        adapter = is_peft(model)
        if adapter:
            model.save_pretrained(str(adapter_dir(tmp)))  # peft's format: the adapter alone
            if merged:
                merged_model(model).save_pretrained(str(tmp))
        else:
            model.save_pretrained(str(tmp))
        for name in TOKENIZER_FILES:
            if (template / name).is_file():
                shutil.copy2(template / name, tmp / name)
        if (not adapter or merged) and not (tmp / "model.safetensors").is_file():
            raise CheckpointError(
                f"saving wrote no model.safetensors (got {sorted(p.name for p in tmp.iterdir())}); "
                "sharded checkpoints are not supported for models this small"
            )
        state = {
            "step": int(step),
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
            "extra": extra or {},
        }
        torch.save(state, tmp / TRAINER_STATE)
        notes = {"step": int(step), "base_model": str(template), "saved_at": time.time(), "extra": extra or {}}
        (tmp / TRAINER_STATE_JSON).write_text(json.dumps(notes, indent=2, default=str))
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _replace_dir(new: Path, target: Path) -> None:
    """Rename `new` onto `target`; an existing `target` is moved aside first and removed after."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{time.monotonic_ns()}")
        target.rename(old)
    new.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def read_trainer_state(checkpoint_dir: str | Path) -> TrainerState:
    """The sidecar alone (no model load). A checkpoint without one (a plain model directory) is step 0."""
    path = Path(checkpoint_dir) / TRAINER_STATE
    if not path.is_file():
        return TrainerState()
    data = torch.load(path, map_location="cpu", weights_only=True)
    return TrainerState(
        step=int(data.get("step", 0)),
        optimizer=data.get("optimizer"),
        rng=data.get("rng") or {},
        extra=data.get("extra") or {},
    )


def restore_rng(state: TrainerState) -> None:
    """Put torch's and Python's global RNGs back where they were when the checkpoint was saved."""
    if "torch" in state.rng:
        torch.set_rng_state(state.rng["torch"])
    if "python" in state.rng:
        version, internal, gauss = state.rng["python"]
        random.setstate((version, tuple(internal), gauss))


def load_checkpoint(
    checkpoint_dir: str | Path, restore_rng_state: bool = True
) -> tuple[PreTrainedModel, dict[str, Any] | None, int]:
    """(model, optimizer_state or None, step). Load the optimizer state into an optimizer built over the
    returned model's parameters: `opt = AdamW(model.parameters(), lr); opt.load_state_dict(optimizer_state)`.
    With `restore_rng_state`, the global RNGs continue where the saved run left off."""
    path = Path(checkpoint_dir)
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise CheckpointError(f"{path} is not a complete checkpoint: missing {', '.join(missing)}")
    model = ModelDir(path).load_model()
    state = read_trainer_state(path)
    if restore_rng_state:
        restore_rng(state)
    return model, state.optimizer, state.step
