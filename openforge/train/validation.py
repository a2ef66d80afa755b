"""A training run's tasks checked against the reward hacks before anything is trained (`validate_tasks`, on by
default; `openforge.rollout.task_gate`): the task directories of the train split, or each generated family on a
few of its instances. A hackable task stops the run with one message (exit status 2) — or, with
`drop_hackable_tasks`, is left out, and the report says so (`task_validation`)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from openforge.rollout.gate_report import GateReport
from openforge.rollout.preflight import effective_image_map
from openforge.rollout.sandbox_choice import choose_sandbox
from openforge.rollout.task_gate import family_units, gate_tasks, task_units
from openforge.tasks import ImageMap, TaskLoadError, load_tasks
from openforge.train.config import TaskSource, TrainConfig
from openforge.train.errors import TrainError

VALIDATION_TASKS = Path("tasks") / "validation"  # the families' instances that are checked, under RUN


def validate_training_tasks(config: TrainConfig, run: Path, console: Console) -> tuple[TrainConfig, GateReport, str]:
    """The run's training tasks checked (HackableTasksError when the run is refused): the config to train with
    (a dropped family is no longer among `tasks.families`; dropped task directories are `report.dropped_tasks()`),
    the report, and the sandbox backend it ran in (`auto` resolved)."""
    sandbox = choose_sandbox(config.sandbox, console)
    families, dirs = config.tasks.families, config.tasks.dirs
    if families is not None:
        units = family_units(families, run / VALIDATION_TASKS)
        image_map = ImageMap(config.episode_image_map())
    else:
        assert dirs is not None  # TaskSource holds exactly one of families and dirs
        try:
            units = task_units(load_tasks(dirs, split="train"))
        except TaskLoadError as e:
            raise TrainError(f"tasks.dirs: {e}") from None
        image_map, _ = effective_image_map(dirs, config.episode_image_map())
    report = gate_tasks(
        units,
        sandbox=sandbox,
        sandbox_options=config.sandbox_options,
        image_map=image_map,
        console=console,
        drop=config.drop_hackable_tasks,
        concurrency=config.rl.concurrency,
    )
    dropped = report.dropped_families()
    if families is not None and dropped:
        kept = TaskSource(families=[f for f in families if f not in dropped])
        config = config.model_copy(update={"tasks": kept})
    return config, report, sandbox
