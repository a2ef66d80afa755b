"""LoRA through peft: the model a stage trains, the merged weights a server loads, the adapter a checkpoint holds.

    model = trainable_model(base_dir, lora)                      # a fresh adapter on the base weights
    model = trainable_model(base_dir, lora, checkpoint=ckpt)     # the adapter of `ckpt`, trainable again
    plain = merged_model(model)                                  # base + B·A·alpha/rank, no peft left

Only the adapter's parameters require grad, so the trainers' optimizers hold state for them alone. A
checkpoint of a LoRA model (`checkpoint.save_checkpoint`) holds the adapter in PEFT's own format in
`CHECKPOINT/adapter/` — a subdirectory, because transformers applies an adapter it finds beside a model's own
weights on top of them, which would apply it twice to the merged weights; the merged weights at the top make
the checkpoint a model directory that anything serving plain weights loads (the embedded engine,
evaluation); vLLM and SGLang load `CHECKPOINT/adapter` itself (`inference/vllm.py`, `inference/sglang.py`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from openforge.models import ModelDir
from openforge.train.errors import TrainError
from openforge.train.trainer_config import LoRASettings

if TYPE_CHECKING:
    from peft import LoraConfig, PeftModel
    from torch import nn
    from transformers import PreTrainedModel

# what a stage trains: the plain model, or the model with its adapter
Policy: TypeAlias = "PreTrainedModel | PeftModel"

ADAPTER_DIR = "adapter"  # under a checkpoint
ADAPTER_CONFIG = "adapter_config.json"


class LoRAConfigError(TrainError, ValueError):
    """A `lora` section that does not fit the model (e.g. a target module it does not have)."""


def adapter_dir(checkpoint: str | Path) -> Path:
    """Where a checkpoint holds its LoRA adapter (PEFT's format: `PeftModel.from_pretrained(base, this)`)."""
    return Path(checkpoint) / ADAPTER_DIR


def has_adapter(checkpoint: str | Path) -> bool:
    return (adapter_dir(checkpoint) / ADAPTER_CONFIG).is_file()


def is_peft(model: object) -> bool:
    from peft import PeftModel

    return isinstance(model, PeftModel)


def peft_config(settings: LoRASettings) -> LoraConfig:
    from peft import LoraConfig, TaskType

    return LoraConfig(
        task_type=TaskType.CAUSAL_LM,
        r=settings.rank,
        lora_alpha=settings.alpha,
        target_modules=list(settings.target_modules),
        lora_dropout=settings.dropout,
        bias="none",
    )


def with_adapter(model: PreTrainedModel, settings: LoRASettings) -> PeftModel:
    """`model` with a fresh adapter (B = 0: the same function until the first step); only the adapter trains."""
    from peft import get_peft_model

    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [t for t in settings.target_modules if t not in names]
    if missing:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if type(m).__name__ == "Linear"})
        raise LoRAConfigError(
            f"lora.target_modules: the model has no module named {', '.join(missing)}; its linear layers are "
            f"{', '.join(linear)}"
        )
    return get_peft_model(model, peft_config(settings))


def trainable_model(
    base_dir: Path,
    settings: LoRASettings | None,
    checkpoint: Path | None = None,
    *,
    activation_checkpointing: bool = False,
) -> Policy:
    """The model a stage trains. Without LoRA: `checkpoint`'s weights (else the base's). With LoRA: the base
    model with `checkpoint`'s adapter, trainable again — or a fresh adapter on `checkpoint`'s weights when it
    holds none (a full fine-tune before a LoRA stage), else on the base's. `activation_checkpointing`: each
    decoder layer recomputes its activations in the backward pass instead of keeping them (transformers'
    gradient checkpointing; `shared_prefix` pauses it for its cached pass)."""
    model: Policy
    if settings is None:
        model = ModelDir(checkpoint or base_dir).load_model()
    elif checkpoint is not None and has_adapter(checkpoint):
        from peft import PeftModel

        base = ModelDir(base_dir).load_model()
        model = PeftModel.from_pretrained(base, str(adapter_dir(checkpoint)), is_trainable=True)
    else:
        model = with_adapter(ModelDir(checkpoint or base_dir).load_model(), settings)
    if activation_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def merged_model(model: Policy) -> PreTrainedModel:
    """The plain model whose weights are base + the adapter's update (a copy: `model` keeps training)."""
    from peft import PeftModel

    if not isinstance(model, PeftModel):
        return model
    return copy.deepcopy(model).merge_and_unload()


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """What an optimizer steps: every parameter without LoRA, the adapter's with it."""
    return [p for p in model.parameters() if p.requires_grad]
