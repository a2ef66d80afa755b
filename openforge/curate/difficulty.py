"""Test, second half: how hard is the task? An independent solver — any backend, through a chosen harness —
attempts every task that grades soundly `attempts` times, through the orchestrator (one sandbox per attempt,
graded by the task's tests, infrastructure failures retried and never counted as failures). The share of graded
attempts that passed is the task's estimated pass rate; the tokens the solver used are counted per task."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from openforge.core import CallRecord
from openforge.core.errors import Interrupted
from openforge.curate.config import SolverSettings
from openforge.curate.ledger import Tokens
from openforge.inference import MESSAGE_LEVEL
from openforge.rollout import run_rollouts
from openforge.rollout.config import RolloutConfig
from openforge.rollout.settings import SandboxName
from openforge.store import TrajectoryStore


@dataclass
class Attempts:
    passed: int = 0
    graded: int = 0
    failures: list[str] = field(default_factory=list)  # infrastructure failures' reasons
    tokens: Tokens = field(default_factory=Tokens)


class SolverInterrupted(Interrupted, RuntimeError):
    """Ctrl-C or SIGTERM stopped the solver's attempts; the finished ones are kept."""


async def solver_attempts(
    tasks: dict[str, Path],
    settings: SolverSettings,
    model: Path,
    run: Path,
    sandbox: SandboxName,
    image_map: dict[str, str],
    console: Console,
) -> dict[str, Attempts]:
    """task id → its attempts, for the tasks (id → directory); resumes a run cut short in `run`."""
    config = RolloutConfig(
        tasks=list(tasks.values()),
        harnesses=[settings.harness],
        sandbox=sandbox,
        samples=settings.attempts,
        concurrency=settings.concurrency,
        model=model,
        backend=settings.backend,
        run=run,
        image_map=image_map,
        harness_options=settings.harness_options,
        max_new_tokens=settings.max_new_tokens,
        resume=(run / "trajectories.db").exists(),
        task_ids=list(tasks),
    )
    summary = await run_rollouts(config, console)
    if summary.interrupted:
        raise SolverInterrupted("interrupted while the solver attempted the tasks")
    out = {task: Attempts() for task in tasks}
    with TrajectoryStore.open(run) as store:
        for episode in store.final_episodes():  # each slot's last attempt: retried ones are not attempts here
            attempts = out.get(episode.task or "")
            if attempts is None:
                continue
            if episode.outcome is None or episode.outcome.is_infrastructure_failure or episode.reward is None:
                attempts.failures.append(
                    f"{episode.outcome.value if episode.outcome else 'unfinished'}: {episode.outcome_reason}"
                )
            else:
                attempts.graded += 1
                attempts.passed += episode.reward >= 1.0
            for call in store.list_calls(episode.id):
                attempts.tokens = attempts.tokens.add(call_tokens(call))
    return out


def call_tokens(call: CallRecord) -> Tokens:
    """What a call cost: the upstream's own counts for a model behind an API, else the ids the proxy recorded."""
    level = call.metadata.get(MESSAGE_LEVEL)
    if level is not None:
        return Tokens(input=level.get("prompt_tokens") or 0, output=level.get("completion_tokens") or 0)
    return Tokens(input=len(call.prompt_ids), output=len(call.output_ids))
