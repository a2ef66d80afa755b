"""Greedy (temperature 0) held-out pass@1 of a policy, served by its own proxy: generated instances with the
react harness in process, or held-out tasks × the run's harnesses through the orchestrator in sandboxes.
Episodes that ended in an infrastructure failure are left out, never counted as 0.

Every measurement carries the episodes' behaviour (`openforge.analysis`: error recovery, self-verification,
format errors, steps, ...). With `faults.eval`, the same held-out set runs a second time with faults
injected into the environment (in RUN/eval/<name>+faults): pass@1 over the episodes that had a fault put in,
and recovery per fault kind.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import Progress

from openforge.analysis import analyze_store
from openforge.core import Episode, Outcome
from openforge.eval.metrics import pass_at_1
from openforge.faults import FaultSpec
from openforge.rollout.family import run_family_episodes
from openforge.rollout.orchestrator import plan, run_label, run_slots
from openforge.sandbox import SandboxProvider
from openforge.store import TrajectoryStore
from openforge.train.context import RunContext
from openforge.train.errors import TrainInterrupted
from openforge.train.records import EVALS_FILE, EvalRecord, append_jsonl
from openforge.train.serving import rollout_config, serving
from openforge.train.stored import stored_episode

FAULTS_SUFFIX = "+faults"  # RUN/eval/<name>+faults: the same evaluation with faults injected
TRANSFER_SUFFIX = "+transfer"  # RUN/eval/<name>+transfer: the trained policies in `transfer_harnesses`
TRANSFER_LABELS = ("sft", "rl")  # the policies evaluated for transfer (trained through the run's harnesses)


@dataclass
class Measurement:
    score: float | None  # None: no episode could be graded
    graded: int
    behaviour: dict[str, Any] | None
    by_harness: dict[str, float | None] = field(default_factory=dict)  # pass@1 in each harness


async def evaluate(
    ctx: RunContext,
    policy: Path,
    run: Path,
    provider: SandboxProvider | None,
    after_steps: int,
    label: str | None = None,
    progress: Progress | None = None,
) -> EvalRecord:
    """One measurement of `policy` (its episodes recorded in `run`; with `faults.eval`, also with faults in
    `run`+faults), appended to RUN/evals.jsonl."""
    clean = await measure(ctx, policy, run, provider, after_steps, None, progress)
    faults = ctx.config.eval_faults
    faulted = None
    if faults is not None:
        faulted = await measure(
            ctx, policy, run.with_name(run.name + FAULTS_SUFFIX), provider, after_steps, faults, progress
        )
    transfer = ctx.config.transfer_harnesses
    if transfer and label in TRANSFER_LABELS:
        moved = await measure(
            ctx, policy, run.with_name(run.name + TRANSFER_SUFFIX), provider, after_steps, None, progress, transfer
        )
        clean.by_harness.update(moved.by_harness)
    record = EvalRecord(
        after_steps=after_steps,
        pass_at_1=clean.score,
        graded=clean.graded,
        policy=str(policy),
        label=label,
        behaviour=clean.behaviour,
        pass_at_1_by_harness=clean.by_harness,
        pass_at_1_with_faults=faulted.score if faulted else None,
        graded_with_faults=faulted.graded if faulted else 0,
        behaviour_with_faults=faulted.behaviour if faulted else None,
    )
    append_jsonl(ctx.run / EVALS_FILE, record)
    ctx.loggers.log_eval(record)
    name = label or f"after {after_steps} step(s)"
    if clean.score is not None:
        ctx.console.print(
            f"{name}: held-out pass@1 = [bold]{100 * clean.score:.1f}%[/] ({clean.graded} graded episodes)"
        )
    if faults is not None and faulted is not None and faulted.score is not None:
        recovery = (faulted.behaviour or {}).get("recovery_rate")
        ctx.console.print(
            f"{name}: with faults ({faults.text()}) pass@1 = [bold]{100 * faulted.score:.1f}%[/] "
            f"({faulted.graded} episodes with a fault)"
            + (f", recovery {100 * recovery:.0f}%" if recovery is not None else "")
        )
    return record


async def measure(
    ctx: RunContext,
    policy: Path,
    run: Path,
    provider: SandboxProvider | None,
    after_steps: int,
    faults: FaultSpec | None,
    progress: Progress | None = None,
    harnesses: list[str] | None = None,
) -> Measurement:
    """Held-out pass@1 in `harnesses` (default: the run's evaluation harnesses)."""
    shutil.rmtree(run, ignore_errors=True)  # a crashed earlier attempt: start clean
    harnesses = harnesses or ctx.config.heldout_harnesses
    if ctx.config.in_process_eval and harnesses == ["react"]:
        episode_ids = await family_eval(ctx, policy, run, faults)
    elif ctx.data.heldout_tasks:
        assert provider is not None
        episode_ids = await task_eval(ctx, policy, run, provider, after_steps, faults, progress, harnesses)
    else:
        ctx.console.print("[yellow]no held-out tasks (split heldout): pass@1 not measured[/]")
        return Measurement(None, 0, None)
    graded = graded_episodes(run, episode_ids, injected_only=faults is not None)
    return Measurement(
        pass_at_1(_results(graded)),
        len(graded),
        analyze_store(run, run).overall.model_dump(mode="json"),
        by_harness={h: pass_at_1(_results([e for e in graded if e.harness == h])) for h in harnesses},
    )


def graded_episodes(run: Path, episode_ids: list[str], injected_only: bool = False) -> list[Episode]:
    """The episodes that were graded (with `injected_only`, those that had a fault put in)."""
    with TrajectoryStore.open(run) as store:
        episodes = [stored_episode(store, i) for i in episode_ids]
    graded = [
        e
        for e in episodes
        if e.outcome is not None and not e.outcome.is_infrastructure_failure and e.reward is not None
    ]
    if injected_only:
        graded = [e for e in graded if any(f.get("applicable") for f in e.metadata.get("faults") or [])]
    return graded


def _results(graded: list[Episode]) -> list[tuple[str, bool]]:
    """(task × harness, passed) of graded episodes, for `openforge.eval.metrics.pass_at_1` (one episode a unit
    here, so pass@1 is the share that passed)."""
    return [(f"{e.task}|{e.harness}", e.outcome is Outcome.passed) for e in graded]


async def family_eval(ctx: RunContext, policy: Path, run: Path, faults: FaultSpec | None) -> list[str]:
    """Held-out instances, the react harness in process."""
    async with serving(ctx.config, policy, run, 0.0) as proxy:
        episodes = await run_family_episodes(
            proxy, ctx.data.heldout_instances, samples=1, react=ctx.config.react(), fault_spec=faults
        )
    return [e.episode_id for e in episodes]


async def task_eval(
    ctx: RunContext,
    policy: Path,
    run: Path,
    provider: SandboxProvider,
    after_steps: int,
    faults: FaultSpec | None,
    progress: Progress | None,
    harnesses: list[str],
) -> list[str]:
    """Held-out tasks × `harnesses`, one episode each, through the orchestrator."""
    async with serving(ctx.config, policy, run, 0.0) as proxy:
        config = rollout_config(ctx, run=run, step=after_steps, temperature=0.0, faults=faults, harnesses=harnesses)
        summary = await run_slots(
            proxy,
            provider,
            config,
            plan(ctx.data.heldout_tasks, harnesses, 1),
            run_label(ctx.run),
            ctx.console,
            progress=progress,
        )
    if summary.interrupted:  # a partial measurement is not recorded
        raise TrainInterrupted(f"the held-out evaluation of {policy}")
    return summary.episode_ids
