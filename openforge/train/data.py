"""A run's tasks: generated instances (families) or task directories, split into what trains and what is
held out — and the check that nothing held out was trained on.

Seeds (deterministic in the run's `seed`): the teacher's instances come from the train split's stream
`seed`, the held-out instances from the held-out split's stream `10_000 + seed`, and GRPO's fresh instances
from one train-split stream `20_000 + seed`, drawn in order (`InstanceStream`)."""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from openforge.tasks import (
    FamilyInstance,
    InstanceSampler,
    Task,
    TaskLoadError,
    check_split_disjoint,
    load_tasks,
    write_task,
)
from openforge.train.config import TrainConfig
from openforge.train.errors import TrainError
from openforge.train.records import StepRecord

TEACHER_SEED, HELDOUT_SEED, RL_SEED = 0, 10_000, 20_000  # added to the run's seed


class InstanceStream:
    """GRPO's fresh training instances: step k takes the k-th slice of `per_step` instances of one
    deterministic stream, so a resumed run draws what an uninterrupted one would have."""

    def __init__(self, families: list[str], seed: int, per_step: int):
        self.families, self.seed, self.per_step = families, seed, per_step
        self._restart()

    def _restart(self) -> None:
        self.sampler = InstanceSampler("train", seed=RL_SEED + self.seed, families=self.families)
        self.position = 0

    def for_step(self, step: int) -> list[FamilyInstance]:
        start = step * self.per_step
        if start < self.position:
            self._restart()
        if start > self.position:
            self.sampler.sample(start - self.position)  # skip what earlier steps drew
        self.position = start + self.per_step
        return self.sampler.sample(self.per_step)


@dataclass
class Data:
    train_tasks: list[Task] = field(default_factory=list)  # dirs: the train split
    heldout_tasks: list[Task] = field(default_factory=list)  # dirs, or families written as tasks (orchestrator)
    heldout_instances: list[FamilyInstance] = field(default_factory=list)  # families
    teacher_instances: list[FamilyInstance] = field(default_factory=list)  # families, with `sft`
    trained_instances: list[FamilyInstance] = field(default_factory=list)  # families: trained on, this process
    stream: InstanceStream | None = None  # families: GRPO's instances

    @property
    def heldout_ids(self) -> list[str]:
        return [t.id for t in self.heldout_tasks] or [i.task_id() for i in self.heldout_instances]


def load_data(config: TrainConfig, run: Path, dropped: Collection[str] = ()) -> Data:
    """The run's tasks; `dropped`: ids of task directories left out of training (found hackable)."""
    rl, families = config.rl, config.tasks.families
    if families is not None:
        heldout = InstanceSampler("heldout", seed=HELDOUT_SEED + config.seed, families=families).sample(
            rl.eval_instances
        )
        teacher = []
        if config.sft is not None:
            teacher = InstanceSampler("train", seed=TEACHER_SEED + config.seed, families=families).sample(
                config.sft.demos
            )
        data = Data(
            heldout_instances=heldout,
            teacher_instances=teacher,
            trained_instances=list(teacher),
            stream=InstanceStream(families, config.seed, rl.prompts),
        )
        if not config.in_process_eval or config.transfer_harnesses:
            data.heldout_tasks = write_instances(heldout, run / "tasks" / "heldout")
        return data
    dirs = config.tasks.dirs
    assert dirs is not None  # TaskSource holds exactly one of families and dirs
    try:
        train = [t for t in load_tasks(dirs, split="train") if t.id not in dropped]
        heldout_tasks = load_tasks(dirs, split="heldout")
    except TaskLoadError as e:
        raise TrainError(f"tasks.dirs: {e}") from None
    if not train:
        raise TrainError(
            f"tasks.dirs: no task of the train split in {', '.join(map(str, dirs))} (a "
            "task's split comes from `split` in task.toml or a train/ or heldout/ parent directory)"
        )
    return Data(train_tasks=train, heldout_tasks=heldout_tasks[: rl.eval_instances])


def write_instances(instances: list[FamilyInstance], root: Path) -> list[Task]:
    """Generated instances as Harbor task directories (for the orchestrator), loaded back as `Task`s."""
    for instance in instances:
        if not (root / instance.task_id()).is_dir():
            write_task(instance, root / instance.task_id())
    return load_tasks(root)


def step_instances(data: Data, step: int) -> list[FamilyInstance]:
    """The step's fresh instances (families), remembered as trained on."""
    assert data.stream is not None
    instances = data.stream.for_step(step)
    data.trained_instances += instances
    return instances


def step_tasks(data: Data, config: TrainConfig, run: Path, step: int, dropped: Collection[str] = ()) -> list[Task]:
    """The step's training tasks for the orchestrator: fresh instances written as task directories, or a draw
    of the train split less the `dropped` tasks (deterministic in seed, step and what was dropped)."""
    if config.tasks.families is not None:
        return write_instances(step_instances(data, step), run / "tasks" / "rl" / f"step-{step:06d}")
    pool = [t for t in data.train_tasks if t.id not in dropped]
    rng = random.Random(f"{config.seed}:{step}")
    return rng.sample(pool, min(config.rl.prompts, len(pool)))


def leaks(data: Data, steps: list[StepRecord]) -> list[str]:
    """Held-out data that appeared in training ([] when clean): task ids, and for families instances or
    (template, directory, extension) combinations."""
    trained = {t for s in steps for t in s.tasks}
    problems = [f"held-out task {t} trained on" for t in sorted(set(data.heldout_ids) & trained)]
    if data.heldout_instances:
        problems += check_split_disjoint(data.trained_instances, data.heldout_instances)
    return problems
