"""The teacher's episodes for SFT: recorded through the proxy and the run's harnesses, one sandbox each, in
RUN/teacher (resumable: finished episodes are kept)."""

from __future__ import annotations

import asyncio

from openforge.rollout import run_rollouts
from openforge.train.context import RunContext
from openforge.train.data import write_instances
from openforge.train.errors import TrainError
from openforge.train.serving import rollout_config


def record_teacher(ctx: RunContext) -> int:
    """Record the teacher (`sft.teacher`, any backend spec) on the teacher's instances (families: `sft.demos`
    generated instances, one episode each) or the train split (dirs: `sft.demos` episodes per task and
    harness); returns how many teacher episodes the run holds."""
    c, settings = ctx.config, ctx.config.sft
    assert settings is not None
    teacher_run = ctx.run / "teacher"
    if c.tasks.families is not None:
        write_instances(ctx.data.teacher_instances, ctx.run / "tasks" / "teacher")
        tasks, samples, split = [ctx.run / "tasks" / "teacher"], 1, None
    else:
        tasks, samples, split = list(c.tasks.dirs), settings.demos, "train"
    config = rollout_config(ctx, tasks=tasks, samples=samples, split=split, backend=settings.teacher,
                            model=settings.teacher_model or ctx.model_path, run=teacher_run,
                            resume=(teacher_run / "trajectories.db").exists())
    summary = asyncio.run(run_rollouts(config, ctx.console))
    if summary.interrupted:
        raise TrainError("interrupted while recording the teacher: continue with --resume")
    episodes = summary.done + summary.skipped
    ctx.console.print(f"{episodes} teacher episodes in the {ctx.sandbox} sandbox")
    return episodes
