"""SFT on the teacher's episodes the recipe keeps (`teacher_selection.py`; merged samples: loss on the teacher's
turns only — the ids it sampled, or its replies re-rendered in the student's template, `rerender.py`), and the
same-compute control (more SFT for GRPO's wall time)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from openforge.core import Sample
from openforge.models import ModelDir
from openforge.store import TrajectoryStore
from openforge.train.assemble import AssemblyMetrics, assemble
from openforge.train.checkpoint import save_checkpoint
from openforge.train.config import SFTSettings
from openforge.train.context import RunContext
from openforge.train.errors import TrainError
from openforge.train.lora import trainable_model
from openforge.train.progress import progress_bar
from openforge.train.rerender import RerenderError, rerender_calls
from openforge.train.sft import SFTTrainer
from openforge.train.stored import stored_episode
from openforge.train.teacher import check_teacher_tokenizer
from openforge.train.teacher_selection import TeacherSelection, select_teacher_episodes

if TYPE_CHECKING:
    from openforge.train.lora import Policy

SFT_DIR, MORE_SFT_DIR = "sft", "sft-more"  # under RUN/checkpoints


def finished_sft(ctx: RunContext) -> Path | None:
    """The SFT checkpoint of an earlier process (its summary into `ctx.sft`), or None."""
    out = ctx.run / "checkpoints" / SFT_DIR
    if not (out / "model.safetensors").is_file():
        return None
    ctx.console.print(f"SFT checkpoint {out} exists: reusing it")
    ctx.sft = json.loads((out / "trainer_state.json").read_text()).get("extra") or {}
    return out


def teacher_demos(ctx: RunContext) -> tuple[list[Sample], TeacherSelection, AssemblyMetrics]:
    """(the samples of the teacher episodes the recipe keeps — message-level recordings re-rendered in the
    student's ids —, what the recipe did, the assembly's metrics)."""
    settings = ctx.config.sft
    assert settings is not None
    check_teacher_tokenizer(settings.teacher, settings.teacher_model, ctx.model_path)
    student = ModelDir(ctx.model_path)
    with TrajectoryStore.open(ctx.run / "teacher") as store:
        selection = select_teacher_episodes(store, settings)
        try:
            pairs = [
                (stored_episode(store, i), rerender_calls(store.list_calls(i), student)) for i in selection.kept_ids
            ]
        except RerenderError as e:
            raise TrainError(f"the teacher's recordings cannot be re-rendered for the student: {e}") from None
    samples, metrics = assemble(pairs)
    return samples, selection, metrics


def sft_stage(ctx: RunContext, teacher_episodes: int) -> Path:
    """SFT from the base model on the teacher's successes; the checkpoint RUN/checkpoints/sft."""
    settings = ctx.config.sft
    assert settings is not None
    demos, selection, metrics = teacher_demos(ctx)
    ctx.console.print(selection.line())
    if not demos:
        raise TrainError(
            f"the teacher ({settings.teacher}) left nothing to SFT on ({selection.line()}); see "
            f"{ctx.run / 'teacher'} (`openforge export` lists its calls), or drop the `sft:` block"
        )
    model_dir = ModelDir(ctx.model_path)
    model = trainable_model(
        ctx.model_path, ctx.config.lora, activation_checkpointing=ctx.config.activation_checkpointing
    )
    trainer = train_sft(model, model_dir, demos, settings, settings.steps, ctx.config.seed, "SFT", ctx.console)
    ctx.sft = {
        "samples": len(demos),
        "teacher_episodes": teacher_episodes,
        "selection": selection.model_dump(),
        "rerendered": selection.message_level,
        "steps": trainer.step_count,
        "first_loss": trainer.losses[0],
        "last_loss": trainer.losses[-1],
        "trained_tokens": metrics.training_tokens["merged"],
        "seconds_per_step": statistics.mean(trainer.step_seconds),
    }
    out = save_checkpoint(
        model,
        ctx.model_path,
        ctx.run / "checkpoints" / SFT_DIR,
        trainer.optimizer,
        trainer.step_count,
        extra=ctx.sft,
        merged=True,  # a LoRA run serves and evaluates it
    )
    ctx.console.print(
        f"SFT on {len(demos)} successful teacher samples ({ctx.sft['trained_tokens']} trained "
        f"tokens): loss {trainer.losses[0]:.3f} → {trainer.losses[-1]:.3f}"
    )
    return out


def train_sft(
    model: Policy,
    model_dir: ModelDir,
    demos: list[Sample],
    settings: SFTSettings,
    steps: int,
    seed: int,
    label: str,
    console: Console,
) -> SFTTrainer:
    """`steps` of SFT on `demos` with the configured schedule, with a progress bar; returns the trainer."""
    trainer = SFTTrainer(model, settings.trainer_config(steps, seed), pad_id=model_dir.pad_token_id)
    with progress_bar(console) as progress:
        bar = progress.add_task(label, total=steps, info="")
        trainer.train(demos, on_step=lambda step, loss: progress.update(bar, advance=1, info=f"loss {loss:.3f}"))
    return trainer


def more_sft(ctx: RunContext, sft_path: Path, seconds: float) -> Path:
    """The same-compute control: continue SFT from the SFT checkpoint for as many steps as fit in `seconds` at
    the SFT stage's measured pace (same demos, same warm-up + schedule, the next seed's batch order)."""
    settings = ctx.config.sft
    assert settings is not None and ctx.sft is not None
    pace = float(ctx.sft.get("seconds_per_step") or 0.0)
    if pace <= 0:
        raise TrainError(
            f"the SFT checkpoint {sft_path} does not say how long its steps took (trained by an older "
            "version): remove it to train SFT again, or drop sft.control"
        )
    steps = max(1, round(seconds / pace))
    demos, _, _ = teacher_demos(ctx)
    model_dir = ModelDir(ctx.model_path)
    model = trainable_model(
        ctx.model_path, ctx.config.lora, sft_path, activation_checkpointing=ctx.config.activation_checkpointing
    )
    trainer = train_sft(model, model_dir, demos, settings, steps, ctx.config.seed + 1, "more SFT", ctx.console)
    ctx.console.print(f"{steps} more SFT steps (GRPO's {seconds:.0f} s at {pace:.2f} s per SFT step)")
    return save_checkpoint(
        model,
        ctx.model_path,
        ctx.run / "checkpoints" / MORE_SFT_DIR,
        trainer.optimizer,
        trainer.step_count,
        merged=True,
    )
