"""A rollout run as a command runs it (`openforge rollout`, and each run of `openforge eval`): the episodes, one
summary line, and an error when Ctrl-C stopped the run or no episode could be graded."""

from __future__ import annotations

import asyncio

from rich.console import Console

from openforge.core.errors import InfrastructureError, Interrupted
from openforge.rollout.config import RolloutConfig
from openforge.rollout.orchestrator import RolloutSummary, run_rollouts


class RolloutInterrupted(Interrupted, RuntimeError):
    """Ctrl-C or SIGTERM stopped the run; the orchestrator has said so (finished episodes are kept, `--resume`
    goes on), so the message is empty."""


class NothingGradedError(InfrastructureError, RuntimeError):
    """Episodes ran, and none could be graded: every one failed for the infrastructure (a sandbox, the proxy,
    the verifier); the message counts what stopped them."""


def run_episodes(config: RolloutConfig, console: Console, label: str = "") -> RolloutSummary:
    """Every slot of `config` not yet finished, then one line of outcomes (`label` says which run it was);
    RolloutInterrupted if Ctrl-C or SIGTERM stopped it."""
    summary = asyncio.run(run_rollouts(config, console))
    console.print(
        f"{summary.done} episodes run{label}, {summary.skipped} already finished: "
        + ", ".join(f"{k}={v}" for k, v in sorted(summary.outcomes.items()))
        + (f" ({summary.tampered} failed for tampering with the verifier)" if summary.tampered else "")
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


def rollout(config: RolloutConfig, console: Console) -> RolloutSummary:
    """`openforge rollout`: the run's episodes, graded; NothingGradedError when none could be."""
    summary = run_episodes(config, console)
    check_graded(summary)
    return summary
