"""A rollout run as a command runs it (`openforge rollout`, and each run of `openforge eval`): its tasks checked
against the reward hacks first where asked (`validate_tasks`), the episodes, one summary line, and an error when
Ctrl-C stopped the run or no episode could be graded."""

from __future__ import annotations

import asyncio
import json

from rich.console import Console

from openforge.core.errors import InfrastructureError, Interrupted
from openforge.core.json_types import JSONObject
from openforge.core.signals import sigterm_as_ctrl_c
from openforge.rollout.config import RolloutConfig
from openforge.rollout.orchestrator import RolloutSummary, run_rollouts, select_tasks
from openforge.rollout.preflight import effective_image_map
from openforge.rollout.sandbox_choice import choose_sandbox
from openforge.rollout.task_gate import gate_tasks, task_units

VALIDATION_FILE = "task-validation.json"


class RolloutInterrupted(Interrupted, RuntimeError):
    """Ctrl-C or SIGTERM stopped the run; the orchestrator has said so (finished episodes are kept, `--resume`
    goes on), so the message is empty."""


class NothingGradedError(InfrastructureError, RuntimeError):
    """Episodes ran, and none could be graded: every one failed for the infrastructure (a sandbox, the proxy,
    the verifier); the message counts what stopped them."""


def run_episodes(config: RolloutConfig, console: Console, label: str = "") -> RolloutSummary:
    """Every slot of `config` not yet finished, then one line of outcomes (`label` says which run it was);
    RolloutInterrupted if Ctrl-C or SIGTERM stopped it."""
    with sigterm_as_ctrl_c():  # a library caller's SIGTERM removes the sandboxes too, as the CLI's does
        summary = asyncio.run(run_rollouts(config, console))
    console.print(
        f"{summary.done} episodes run{label}, {summary.skipped} already finished: "
        + ", ".join(f"{k}={v}" for k, v in sorted(summary.outcomes.items()))
        + (f" ({summary.tampered} failed for tampering with the verifier)" if summary.tampered else "")
    )
    warm = summary.warm
    if warm.hits + warm.misses:
        console.print(
            f"sandboxes started ahead: {warm.hits} of {warm.hits + warm.misses} episodes ({warm.hit_rate:.0%}); "
            f"waited {warm.wait_s / (warm.hits + warm.misses):.2f} s per episode for one; at most {warm.peak_live} warm"
        )
    if summary.interrupted:
        raise RolloutInterrupted()
    return summary


def check_graded(summary: RolloutSummary) -> None:
    """NothingGradedError when episodes ran and none of them could be graded."""
    if summary.done and not summary.graded:
        reasons = sorted(summary.failures.items(), key=lambda kv: -kv[1])
        raise NothingGradedError(
            "no episode could be graded; what stopped them:\n" + "\n".join(f"  {n} × {why}" for why, n in reasons[:5])
        )


def validated_tasks(config: RolloutConfig, console: Console) -> tuple[RolloutConfig, JSONObject | None]:
    """With `validate_tasks`, the run's tasks checked against the reward hacks (`openforge.rollout.task_gate`),
    the verdicts written to RUN/task-validation.json: the config to run (without the tasks dropped, with
    `drop_hackable_tasks`) and the verdicts; HackableTasksError when the run is refused. Without it, `config`
    and None."""
    if not config.validate_tasks:
        return config, None
    tasks = select_tasks(config)
    image_map, _ = effective_image_map(config.tasks, config.image_map)
    sandbox = choose_sandbox(config.sandbox, console)
    report = gate_tasks(
        task_units(tasks),
        sandbox=sandbox,
        sandbox_options=config.sandbox_options,
        image_map=image_map,
        console=console,
        drop=config.drop_hackable_tasks,
        concurrency=config.concurrency,
    )
    verdicts = report.to_json()
    config.run.mkdir(parents=True, exist_ok=True)
    (config.run / VALIDATION_FILE).write_text(json.dumps(verdicts, indent=1))
    dropped = report.dropped_tasks()
    if dropped:
        config = config.model_copy(update={"task_ids": [t.id for t in tasks if t.id not in dropped]})
    return config.model_copy(update={"sandbox": sandbox}), verdicts


def rollout(config: RolloutConfig, console: Console) -> RolloutSummary:
    """`openforge rollout`: the run's tasks validated where asked, then its episodes, graded;
    NothingGradedError when none could be."""
    config, _ = validated_tasks(config, console)
    summary = run_episodes(config, console)
    check_graded(summary)
    return summary
