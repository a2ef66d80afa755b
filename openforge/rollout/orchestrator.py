"""The orchestrator: start a proxy, fill every (task, harness, sample) slot with a graded episode, retry
infrastructure failures, show progress, survive Ctrl-C and crashes.

- Each slot's final attempt is marked `final` in its episode's metadata; `--resume` skips slots whose final
  attempt is stored, and redoes the rest (an attempt cut short by a crash has no outcome).
- Ctrl-C cancels every episode; each destroys its own sandbox, and the run's leftovers are removed by label
  (`provider.cleanup(run)`) before returning — also at the start, for leftovers of an earlier crash.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from openforge.core import GRADED_OUTCOMES
from openforge.core.errors import ConfigurationError
from openforge.core.runlock import RunDirBusy, locked_run_dir
from openforge.harness.bundle import default_bundle_dir
from openforge.proxy.server import ProxyConfig, running_proxy
from openforge.rollout.config import RolloutConfig
from openforge.rollout.episode import EpisodeRunner, Slot
from openforge.rollout.outcome import record_outcome
from openforge.rollout.preflight import PreflightError, check_harnesses, check_images, effective_image_map
from openforge.rollout.protocols import EpisodeServer
from openforge.rollout.sandbox_choice import choose_sandbox
from openforge.rollout.warm_pool import PoolStats, WarmPool
from openforge.sandbox import SandboxProvider, get_provider
from openforge.store import TrajectoryStore
from openforge.tasks import ImageMap, Task, load_tasks


class RolloutError(ConfigurationError, RuntimeError):
    """The run cannot start (no tasks, a run directory in use, ...); the message says what to do."""


@dataclass
class RolloutSummary:
    run: Path
    slots: int
    done: int = 0
    skipped: int = 0  # finished in an earlier run (--resume)
    outcomes: dict[str, int] = field(default_factory=dict)
    tampered: int = 0  # final attempts graded failed for tampering with the verifier (among outcomes' `failed`)
    interrupted: bool = False
    episode_ids: list[str] = field(default_factory=list)  # the final attempt of each slot filled, in finishing order
    failures: dict[str, int] = field(default_factory=dict)  # "outcome: reason" of slots left ungraded → count
    warm: PoolStats = field(default_factory=PoolStats)  # what the warm sandboxes did (`warm_sandboxes`)

    @property
    def graded(self) -> int:
        return sum(self.outcomes.get(o.value, 0) for o in GRADED_OUTCOMES)


def plan(tasks: list[Task], harnesses: list[str], samples: int) -> list[Slot]:
    """The slots to fill, harness by harness, a task's samples together. Episodes that run at the same time then
    mostly share their harness's prompt (its system prompt and tools: thousands of tokens), which the embedded
    engine reads once and, with cascade attention, attends to once for the whole batch; ordered task by task,
    every batch would mix the harnesses and share nothing (docs/inference.md, "Harness by harness")."""
    return [Slot(t, h, s) for h in harnesses for t in tasks for s in range(samples)]


def run_label(run: Path) -> str:
    """A short, stable label for the run's sandboxes (so leftovers can be found after a crash)."""
    resolved = str(run.resolve())
    return f"{run.name[:20]}-{hashlib.sha256(resolved.encode()).hexdigest()[:8]}"


def finished_slots(store: TrajectoryStore) -> set[str]:
    return {e.metadata["slot"] for e in store.final_episodes() if "slot" in e.metadata}


def select_tasks(config: RolloutConfig) -> list[Task]:
    tasks = load_tasks(config.tasks, split=config.split)
    if config.task_ids is not None:
        wanted = set(config.task_ids)
        tasks = [t for t in tasks if t.id in wanted]
        missing = wanted - {t.id for t in tasks}
        if missing:
            raise RolloutError(f"no such task(s) in {', '.join(map(str, config.tasks))}: {', '.join(sorted(missing))}")
    if not tasks:
        raise RolloutError(
            f"no tasks found in {', '.join(map(str, config.tasks))}"
            + (f" (split {config.split})" if config.split else "")
        )
    return tasks


async def run_rollouts(config: RolloutConfig, console: Console | None = None) -> RolloutSummary:
    """Every (task, harness, sample) slot of `config` not yet finished in `config.run`, graded, in sandboxes.
    RolloutError if another process holds the run directory (its sandboxes share this run's label)."""
    try:
        with locked_run_dir(config.run):
            return await _run_rollouts(config, console or Console())
    except RunDirBusy as e:
        raise RolloutError(str(e)) from None


async def _run_rollouts(config: RolloutConfig, console: Console) -> RolloutSummary:
    tasks = select_tasks(config)
    try:
        image_map, map_files = effective_image_map(config.tasks, config.image_map)
    except PreflightError as e:
        raise RolloutError(str(e)) from None
    for f in map_files:
        console.print(f"image map: {f}")
    config = config.model_copy(update={"image_map": image_map.to_dict()})
    slots = plan(tasks, config.harnesses, config.samples)
    label = run_label(config.run)
    socket_dir = Path(tempfile.mkdtemp(prefix="openforge-proxy-"))  # a short path: AF_UNIX allows ~107 bytes
    proxy_config = ProxyConfig(
        **config.proxy_settings(),
        model=config.model,
        backend=config.backend,
        run=config.run,
        listen=config.proxy_listen,
        uds=socket_dir / "model.sock",
        admin_listen="127.0.0.1:0",
        temperature=config.temperature,
        top_p=config.top_p,
        backend_options=config.engine_options.backend_options(config.backend),
    )
    config = config.model_copy(update={"sandbox": choose_sandbox(config.sandbox, console)})
    provider = get_provider(config.sandbox, **config.sandbox_options)
    summary = RolloutSummary(config.run, len(slots))
    try:
        try:  # before any episode: a missing image is one error, not every episode's
            check_harnesses(tasks, config.harnesses)
            await check_images(tasks, image_map, provider)
        except PreflightError as e:
            raise RolloutError(str(e)) from None
        async with running_proxy(proxy_config) as proxy:
            store = proxy.store
            done = finished_slots(store)
            if done and not config.resume:
                raise RolloutError(
                    f"{config.run} already holds finished episodes: pass --resume to continue "
                    "that run, or choose a new --run directory"
                )
            todo = [s for s in slots if s.key not in done]
            summary.skipped = len(slots) - len(todo)
            store.set_run_info({"rollout": config.model_dump(mode="json")})
            removed = await provider.cleanup(label)
            if removed:
                console.print(f"removed {removed} sandbox(es) left over by an earlier run")
            await run_slots(proxy, provider, config, todo, label, console, summary)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
        try:
            await asyncio.shield(provider.cleanup(label))
        finally:
            await provider.close()
    return summary


async def run_slots(
    proxy: EpisodeServer,
    provider: SandboxProvider,
    config: RolloutConfig,
    slots: list[Slot],
    label: str,
    console: Console,
    summary: RolloutSummary | None = None,
    progress: Progress | None = None,
    limit: asyncio.Semaphore | None = None,
) -> RolloutSummary:
    """Fill `slots` with graded episodes against a proxy and a sandbox provider that are already running (the
    training loop keeps one proxy for all its steps: no second proxy is started). `config.step` is written on
    every episode (GRPO groups are (step, task, harness)). `progress`: show a bar in that live display instead
    of opening one (rich allows one live display at a time). `limit`: the episodes at once, shared with other
    batches running beside this one (asynchronous GRPO's steps); default `config.concurrency` of its own. The
    summary's `episode_ids` are the slots' final attempts."""
    summary = summary or RolloutSummary(config.run, len(slots))
    bundle = config.harness_bundle or default_bundle_dir()
    runner = EpisodeRunner(
        proxy,
        provider,
        config,
        ImageMap.from_config(config.image_map),
        label,
        bundle,
        step=config.step,
        fault_spec=config.faults,
    )
    await _run_slots(runner, slots, config, summary, console, progress, limit)
    return summary


async def _run_slots(
    runner: EpisodeRunner,
    slots: list[Slot],
    config: RolloutConfig,
    summary: RolloutSummary,
    console: Console,
    progress: Progress | None = None,
    limit: asyncio.Semaphore | None = None,
) -> None:
    if progress is None:
        columns = (
            TextColumn("[bold]rollouts"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[tally]}"),
        )
        with Progress(*columns, console=console, transient=False) as own:
            await _fill_slots(runner, slots, config, summary, console, own, limit=limit)
        return
    bar = progress.add_task("rollouts", total=len(slots), tally="", info="")
    try:
        await _fill_slots(runner, slots, config, summary, console, progress, bar, limit)
    finally:
        progress.remove_task(bar)  # a caller's display keeps only its own bars between batches


async def _fill_slots(
    runner: EpisodeRunner,
    slots: list[Slot],
    config: RolloutConfig,
    summary: RolloutSummary,
    console: Console,
    progress: Progress,
    bar: TaskID | None = None,
    limit: asyncio.Semaphore | None = None,
) -> None:
    store = runner.proxy.store
    limit = limit or asyncio.Semaphore(config.concurrency)
    if bar is None:
        bar = progress.add_task("rollouts", total=len(slots), tally="")

    def tally() -> str:
        shown = " ".join(f"{k}={v}" for k, v in sorted(summary.outcomes.items()))
        return shown + (f" (tampered={summary.tampered})" if summary.tampered else "")

    async def fill(slot: Slot) -> None:
        async with limit:
            upcoming.remove(slot)
            for attempt in range(config.max_attempts):
                result = await runner.run(slot, attempt)
                final = not result.infrastructure_failure or not result.retry or attempt == config.max_attempts - 1
                record_outcome(store, result, final)
                if final:
                    break
                console.print(f"[yellow]retrying[/] {slot.key} after {result.outcome.value}: {result.reason}")
        summary.done += 1
        summary.episode_ids.append(result.episode_id)
        if result.infrastructure_failure:
            why = f"{result.outcome.value}: {(result.reason or '').splitlines()[0] if result.reason else 'no reason'}"
            summary.failures[why] = summary.failures.get(why, 0) + 1
        summary.outcomes[result.outcome.value] = summary.outcomes.get(result.outcome.value, 0) + 1
        summary.tampered += bool(result.tampered)
        progress.update(bar, advance=1, tally=tally(), info=tally())

    warm = WarmPool(runner.provider, config.warm_sandboxes, runner.run_label)
    summary.warm = warm.stats
    upcoming = deque(slots)
    runner.plan_ahead(warm, upcoming)
    jobs = [asyncio.create_task(fill(s)) for s in slots]
    try:
        await asyncio.gather(*jobs)
    except asyncio.CancelledError:
        summary.interrupted = True
        # gather already passed the cancellation to every job; a second cancel would interrupt their
        # clean-up (destroying sandboxes), so only wait for them
        await asyncio.gather(*jobs, return_exceptions=True)
        console.print("[yellow]interrupted[/]: finished episodes are kept; continue with --resume")
    except BaseException:
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        raise
    finally:
        runner.warm = None
        await asyncio.shield(warm.close())  # what no episode took is destroyed, on every path
