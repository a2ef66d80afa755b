"""The teacher's episodes for SFT: recorded through the proxy and the run's harnesses, one sandbox each, in
RUN/teacher (resumable: finished episodes are kept).

A token-level teacher's ids go straight into the student's SFT, so it must share the student's tokenizer and
chat template (`check_teacher_tokenizer`); a teacher behind an API is recorded as messages and re-rendered for
the student (`rerender.py`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from openforge.inference import is_message_level
from openforge.models import ModelDir
from openforge.rollout import run_rollouts
from openforge.train.context import RunContext
from openforge.train.data import write_instances
from openforge.train.errors import TrainError, TrainInterrupted
from openforge.train.serving import rollout_config


def check_teacher_tokenizer(teacher: str, teacher_model: Path | None, student: Path) -> None:
    """TrainError when a token-level teacher's model directory does not share the student's tokenizer and chat
    template: its ids would mean other text to the student, and SFT would train on wrong ids."""
    if is_message_level(teacher) or teacher_model is None or Path(teacher_model).resolve() == Path(student).resolve():
        return
    theirs, ours = ModelDir(teacher_model), ModelDir(student)
    if theirs.tokenizer.to_str() != ours.tokenizer.to_str():
        differs = f"another tokenizer (vocabulary {theirs.vocab_size}, the student's {ours.vocab_size})"
    elif theirs.chat_template != ours.chat_template:
        differs = "another chat template"
    else:
        return
    raise TrainError(
        f"sft.teacher_model {teacher_model} has {differs} than the student {student}: the teacher's token ids mean "
        "other text to the student, and SFT would train on wrong ids. Serve the teacher behind an OpenAI-compatible "
        "endpoint (`openforge serve-model --model TEACHER --tool-call-parser auto`, vLLM, SGLang) and set "
        "`sft.teacher: openai:URL` (its recordings are re-rendered with the student's template), or use a teacher "
        "that shares the student's tokenizer"
    )


def record_teacher(ctx: RunContext) -> int:
    """Record the teacher (`sft.teacher`, any backend spec) on the teacher's instances (families: `sft.demos`
    generated instances) or the train split (dirs), `sft.rollouts_per_task` episodes per task and harness
    (default: 1 with families, `sft.demos` with dirs); returns how many teacher episodes the run holds."""
    c, settings = ctx.config, ctx.config.sft
    assert settings is not None
    teacher_model = None if is_message_level(settings.teacher) else settings.teacher_model or ctx.model_path
    check_teacher_tokenizer(settings.teacher, teacher_model, ctx.model_path)
    teacher_run = ctx.run / "teacher"
    if c.tasks.families is not None:
        write_instances(ctx.data.teacher_instances, ctx.run / "tasks" / "teacher")
        tasks, samples, split = [ctx.run / "tasks" / "teacher"], settings.rollouts_per_task or 1, None
    else:
        assert c.tasks.dirs is not None  # TaskSource holds exactly one of families and dirs
        tasks, samples, split = list(c.tasks.dirs), settings.rollouts_per_task or settings.demos, "train"
    # a teacher behind an API renders nothing: the proxy keeps the student's model for token counts
    config = rollout_config(
        ctx,
        tasks=tasks,
        samples=samples,
        split=split,
        backend=settings.teacher,
        model=teacher_model or ctx.model_path,
        run=teacher_run,
        resume=(teacher_run / "trajectories.db").exists(),
    )
    summary = asyncio.run(run_rollouts(config, ctx.console))
    if summary.interrupted:
        raise TrainInterrupted("the teacher's episodes")
    episodes = summary.done + summary.skipped
    ctx.console.print(f"{episodes} teacher episodes in the {ctx.sandbox} sandbox")
    return episodes
