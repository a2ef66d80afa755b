"""Greedy (temperature 0) held-out pass@1 of a policy, served by its own proxy: generated instances with the
react harness in process, or held-out tasks × the run's harnesses through the orchestrator in sandboxes.
Episodes that ended in an infrastructure failure are left out, never counted as 0."""

from __future__ import annotations

import shutil
from pathlib import Path

from openforge.rollout.family import pass_at_1
from openforge.rollout.orchestrator import plan, run_label, run_slots
from openforge.sandbox import SandboxProvider
from openforge.train.context import RunContext
from openforge.train.records import EVALS_FILE, EvalRecord, append_jsonl
from openforge.train.serving import rollout_config, serving


async def evaluate(ctx: RunContext, policy: Path, run: Path, provider: SandboxProvider | None, after_steps: int,
                   label: str | None = None, progress=None) -> EvalRecord:
    """One measurement of `policy` (its episodes recorded in `run`), appended to RUN/evals.jsonl."""
    shutil.rmtree(run, ignore_errors=True)  # a crashed earlier attempt: start clean
    if ctx.config.in_process:
        score, graded = await family_eval(ctx, policy, run)
    elif ctx.data.heldout_tasks:
        assert provider is not None
        score, graded = await task_eval(ctx, policy, run, provider, after_steps, progress)
    else:
        ctx.console.print("[yellow]no held-out tasks (split heldout): pass@1 not measured[/]")
        score, graded = None, 0
    record = EvalRecord(after_steps=after_steps, pass_at_1=score, graded=graded, policy=str(policy), label=label)
    append_jsonl(ctx.run / EVALS_FILE, record)
    ctx.loggers.log_eval(record)
    if score is not None:
        name = label or f"after {after_steps} step(s)"
        ctx.console.print(f"{name}: held-out pass@1 = [bold]{100 * score:.1f}%[/] ({graded} graded episodes)")
    return record


async def family_eval(ctx: RunContext, policy: Path, run: Path) -> tuple[float, int]:
    """Held-out instances, the react harness in process."""
    async with serving(ctx.config, policy, run, 0.0) as proxy:
        return await pass_at_1(proxy, ctx.data.heldout_instances, react=ctx.config.react())


async def task_eval(ctx: RunContext, policy: Path, run: Path, provider: SandboxProvider, after_steps: int,
                    progress=None) -> tuple[float | None, int]:
    """Held-out tasks × harnesses, one episode each, through the orchestrator."""
    async with serving(ctx.config, policy, run, 0.0) as proxy:
        config = rollout_config(ctx, run=run, step=after_steps, temperature=0.0)
        summary = await run_slots(proxy, provider, config, plan(ctx.data.heldout_tasks, ctx.config.harnesses, 1),
                                  run_label(ctx.run), ctx.console, progress=progress)
        final = [proxy.store.get_episode(i) for i in summary.episode_ids]
    graded = [e for e in final if not e.outcome.is_infrastructure_failure and e.reward is not None]
    if not graded:
        return None, 0
    return sum(e.reward >= 1.0 for e in graded) / len(graded), len(graded)
