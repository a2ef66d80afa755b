"""Tasks validated before they are trained on (`TaskValidationSettings`: on in `openforge train`, `--validate-tasks`
in `rollout` / `eval`): the built-in reward-hack suite (`openforge.rollout.hacks`, run as `openforge tasks
validate --run` runs it: the reference solution must score 1, then every hack in a fresh sandbox, graded as an
episode is) once per task directory, and once per generated family on `FAMILY_INSTANCES` of its instances
rather than per instance.

Each verdict is cached on disk (`$OPENFORGE_HOME/task-validation/KEY.json`), keyed by the task's content
(`openforge.tasks.digest.task_content_hash`; a family's: its instances'), the suite and the code that grades it
(`grading_digest`), the sandbox backend and the image map — a changed task, hack, grading rule or backend is
validated again. A verdict is cached only when the task could be checked (its reference scored 1).

A unit (a task, or a family) the suite beats — or that could not be checked — is refused: one
`HackableTasksError` (exit status 2) names each, and the hack it fell to; with `drop_hackable_tasks` they are
left out instead, and the report (`GateReport.to_json`, in the run's report) says which.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from openforge.core.errors import TaskError
from openforge.core.signals import sigterm_as_ctrl_c
from openforge.harness.bundle import openforge_home
from openforge.rollout.gate_report import GateReport, UnitVerdict, refusal_message, summary_line
from openforge.rollout.hacks import HACKS, Hack, suite_digest
from openforge.rollout.validate import ValidationResult, validate_task_by_running
from openforge.sandbox import get_provider
from openforge.tasks import ImageMap, InstanceSampler, Task, load_task, write_task
from openforge.tasks.digest import task_content_hash

__all__ = [
    "FAMILY_INSTANCES",
    "GateUnit",
    "HackableTasksError",
    "cache_key",
    "family_units",
    "gate_tasks",
    "grading_digest",
    "store_verdict",
    "task_units",
]

FAMILY_INSTANCES = 2  # instances of a generated family the suite runs against
FAMILY_SEED = 0  # their draw (the train split's): the same instances, and so the same cache key, every run
CACHE_DIR = "task-validation"
RUN_LABEL = "openforge-validate"


class HackableTasksError(TaskError, ValueError):
    """Tasks a run was to train on fall to reward hacks (or cannot be checked); the message names each task, the
    hack it fell to and the ways on."""


@dataclass
class GateUnit:
    """What one verdict is about: a task directory (`kind` "task", `name` its id), or a generated family
    (`kind` "family", `name` the family's) checked on a few instances written as task directories."""

    name: str
    kind: str
    tasks: list[Task]

    def digest(self) -> str:
        h = hashlib.sha256(self.kind.encode())
        for t in sorted(self.tasks, key=lambda t: t.id):
            h.update(f"\0{t.id}\0{task_content_hash(t)}".encode())
        return h.hexdigest()


def task_units(tasks: list[Task]) -> list[GateUnit]:
    """One unit per task directory."""
    return [GateUnit(t.id, "task", [t]) for t in tasks]


def family_units(families: list[str], root: Path, instances: int = FAMILY_INSTANCES) -> list[GateUnit]:
    """One unit per generated family: `instances` of its train-split instances (a fixed draw), written as task
    directories under `root/FAMILY/`."""
    units = []
    for family in families:
        tasks = []
        for instance in InstanceSampler("train", seed=FAMILY_SEED, families=[family]).sample(instances):
            d = root / family / instance.task_id()
            if not (d / "task.toml").is_file():
                write_task(instance, d, seed=FAMILY_SEED, task_id=instance.task_id())
            tasks.append(load_task(d))
        units.append(GateUnit(family, "family", tasks))
    return units


def grading_digest() -> str:
    """A digest of the code that decides a verdict: the rollout room (grading, the tamper check, validation, the
    hacks), the sandbox backends and the tasks room's readers (a generated family's files are in its digest)."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]  # openforge/
    for room in ("rollout", "sandbox", "tasks"):
        for path in sorted(p for p in (package / room).rglob("*.py") if "families" not in p.parts):
            h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def cache_key(unit: GateUnit, suite: str, grading: str, sandbox: str, image_map: ImageMap) -> str:
    parts = [unit.kind, unit.name, unit.digest(), suite, grading, sandbox, sorted(image_map.to_dict().items())]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:40]


def default_cache_dir() -> Path:
    return openforge_home() / CACHE_DIR


def _cached(cache: Path, key: str) -> UnitVerdict | None:
    try:
        data = json.loads((cache / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None  # absent, or unreadable: validated again
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    try:
        return UnitVerdict.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None


def store_verdict(cache: Path, verdict: UnitVerdict) -> None:
    """Keep `verdict` in the cache directory `cache` (written whole, then moved into place)."""
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f"{verdict.key}.json.tmp"
    tmp.write_text(json.dumps(verdict.to_json(), indent=1))
    tmp.replace(cache / f"{verdict.key}.json")


def verdict_of(unit: GateUnit, key: str, results: list[ValidationResult]) -> UnitVerdict:
    """A unit's verdict from its tasks' validation results."""
    verdict = UnitVerdict(unit.name, unit.kind, [t.id for t in unit.tasks], key)
    for r in results:
        if not r.hacks:  # the hacks run once the reference scored 1: the task could not be checked
            verdict.problems += [f"{r.task_id}: {e}" for e in r.errors] or [f"{r.task_id}: not checked"]
        verdict.fell += [{"task": r.task_id, "hack": h.hack, "verdict": h.verdict()} for h in r.hacks if h.fell]
    return verdict


async def check_units(
    units: list[GateUnit],
    *,
    sandbox: str,
    sandbox_options: dict[str, object],
    image_map: ImageMap,
    console: Console,
    hacks: list[Hack] | None = None,
    concurrency: int = 4,
    cache_dir: Path | None = None,
) -> GateReport:
    """Every unit's verdict: from the cache where it holds one, else by running the suite (`concurrency`
    sandboxes at a time, a progress bar meanwhile), then cached."""
    started = time.monotonic()
    suite = list(HACKS) if hacks is None else hacks
    cache = cache_dir or default_cache_dir()
    digest, grading = suite_digest(suite), grading_digest()
    keys = {u.name: cache_key(u, digest, grading, sandbox, image_map) for u in units}
    verdicts = {u.name: v for u in units if (v := _cached(cache, keys[u.name])) is not None}
    todo = [u for u in units if u.name not in verdicts]
    if verdicts:
        console.print(f"task validation: {len(verdicts)} of {len(units)} verdict(s) cached ({cache})")
    if todo:
        provider = get_provider(sandbox, **sandbox_options)
        try:
            with _progress(console) as bar:
                runs = sum(
                    1 + sum(h.applies_to(t.gui is not None, t.gui.kind if t.gui else None) for h in suite)
                    for u in todo
                    for t in u.tasks
                )
                job = bar.add_task(f"validating {len(todo)} task(s) against {len(suite)} hacks", total=runs)
                for unit in todo:
                    results = [
                        await validate_task_by_running(
                            task,
                            provider,
                            image_map,
                            check_wrong=False,
                            run=RUN_LABEL,
                            hacks=suite,
                            concurrency=concurrency,
                            progress=lambda: bar.advance(job),
                        )
                        for task in unit.tasks
                    ]
                    verdict = verdicts[unit.name] = verdict_of(unit, keys[unit.name], results)
                    if not verdict.problems:
                        store_verdict(cache, verdict)
                    mark = "[green]✓[/]" if verdict.ok else "[red]✗[/]"
                    bar.console.print(f"{mark} {escape(verdict.describe() if not verdict.ok else unit.name)}")
        finally:
            await provider.close()
    return GateReport(
        sandbox, len(suite), digest, [verdicts[u.name] for u in units], seconds=time.monotonic() - started
    )


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )


def gate_tasks(
    units: list[GateUnit],
    *,
    sandbox: str,
    sandbox_options: dict[str, object],
    image_map: ImageMap,
    console: Console,
    drop: bool,
    concurrency: int = 4,
    hacks: list[Hack] | None = None,
    cache_dir: Path | None = None,
) -> GateReport:
    """Check `units` (`check_units`) and act on the verdicts: HackableTasksError naming every unit refused,
    unless `drop`, which leaves them out (`GateReport.dropped`) — and refuses only when nothing is left."""
    with sigterm_as_ctrl_c():  # a library caller's SIGTERM removes the probe sandboxes too
        report = asyncio.run(
            check_units(
                units,
                sandbox=sandbox,
                sandbox_options=sandbox_options,
                image_map=image_map,
                console=console,
                hacks=hacks,
                concurrency=concurrency,
                cache_dir=cache_dir,
            )
        )
    refused = report.refused
    if refused and (not drop or len(refused) == len(units)):
        raise HackableTasksError(refusal_message(report, drop))
    report.dropped = [v.name for v in refused]
    console.print(summary_line(report))
    return report
