"""Fast episodes on generated task families: the react harness's own loop, run in this process (one thread
per episode) against a running proxy, its shell commands jailed in a scratch work directory, graded in
memory by the instance's own check (the same comparison its `tests/test.sh` makes). Outcomes follow the one rule
of `openforge.rollout.outcome`: a model API failure is the infrastructure's (`proxy_error`), unless the API
refused what the agent's conversation had grown into (400/413: `failed`, reward 0). The react loop runs in this
process, so the agent cannot kill or hang its harness; each command is jailed with its own timeout.

This is what makes RL on a CPU affordable: a GRPO step needs about a hundred episodes, and a container per
episode would cost more than sampling and training together. The model calls take exactly the path they
take in any rollout (Chat Completions → proxy → renderer with continuity → backend → store), so the
recorded calls are the same training data; only the sandbox is lighter: the sandbox room's light jail
(`openforge.sandbox.run_jailed`; `sandbox/local/jail.py` says what it isolates). Tasks that are not generated
instances use the orchestrator (`run_rollouts`).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openforge.core import Outcome, TaskPayload
from openforge.core.errors import ConfigurationError
from openforge.core.json_types import JSONObject
from openforge.faults import FaultPlan, FaultSpec, FaultTargets
from openforge.faults.local import CommandRunner, FaultyRunner, apply_setup
from openforge.harness.react import ReactAdapter
from openforge.harness.react_agent import ModelAPIError, format_output, run_agent
from openforge.rollout import faults
from openforge.rollout.outcome import AGENT_FAULT, AttemptResult, agent_failure, call_timings, record_outcome
from openforge.rollout.protocols import EpisodeServer
from openforge.sandbox import prepare_workdir, run_jailed
from openforge.tasks import FamilyInstance, state_check

if TYPE_CHECKING:
    from openforge.harness.react_agent import ToolRunner

HARNESS = "react"


@dataclass
class FamilyEpisode:
    instance: FamilyInstance
    sample: int
    episode_id: str
    outcome: Outcome
    reward: float | None
    transcript: dict[str, Any] = field(default_factory=dict)


def task_payload(instance: FamilyInstance) -> TaskPayload:
    """The episode's task as the proxy keeps it (the oracle reads `solution` and `shell_tool`)."""
    return TaskPayload(
        id=instance.task_id(),
        instruction=instance.instruction,
        family=instance.family,
        split=instance.split,
        solution=instance.solution_command,
        shell_tool=ReactAdapter.shell_tool,
        look=instance.look_command,
        check=instance.check_command,
    )


def jailed_tools(workdir: Path, command_timeout_s: float = 20.0, run_command: CommandRunner = run_jailed) -> ToolRunner:
    """The react harness's tools, acting only inside `workdir` (bash in the jail — through `run_command`, which
    the episode's faults wrap —; read/write confined)."""
    root = workdir.resolve()

    def inside(path: str) -> Path | None:
        target = (root / str(path).removeprefix("/app/").lstrip("/")).resolve()
        return target if target == root or root in target.parents else None

    def run(name: str, arguments: Mapping[str, object]) -> tuple[str, bool]:
        if name == "bash":
            out, err, code = run_command(workdir, str(arguments.get("command", "")), command_timeout_s)
            return format_output(out, err, code), False
        if name in ("read", "write"):
            target = inside(str(arguments.get("path", "")))
            if target is None:
                return f"[error: {arguments.get('path')!r} is outside the working directory]", False
            try:
                if name == "read":
                    return target.read_text(errors="replace")[:4000] or "(empty file)", False
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(str(arguments.get("content", "")))
                return f"wrote {arguments.get('path')}", False
            except OSError as e:
                return f"[error: {e}]", False
        if name == "submit":
            return "submitted", True
        return f"unknown tool {name!r}; use bash, read, write or submit", False

    return run


def _silent(event: JSONObject) -> None:
    return None


async def run_family_episodes(
    proxy: EpisodeServer,
    instances: list[FamilyInstance],
    samples: int = 1,
    *,
    step: int = 0,
    react: ReactAdapter | None = None,
    concurrency: int = 128,
    fault_spec: FaultSpec | None = None,
) -> list[FamilyEpisode]:
    """`samples` episodes of every instance, concurrently; each recorded by the proxy and graded. `react`: the
    harness's options (`max_steps`, `max_tokens`, `tools`, `system_prompt`), as a sandboxed episode of the
    `react` harness would take them; its defaults when None. `fault_spec`: faults injected into the episodes'
    environments (the same draw for every sample of an instance in a step), recorded on each episode."""
    if proxy.url is None:
        raise ConfigurationError(
            "in-process episodes call the model API over TCP: start the proxy with a TCP listener (listen)"
        )
    url = proxy.url
    react = react or ReactAdapter()
    tools = list(react.tools) or None
    loop = asyncio.get_running_loop()
    scratch = Path(tempfile.mkdtemp(prefix="openforge-family-"))
    scratch.chmod(0o711)  # the jail's user must reach its work directory inside
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="react")
    limit = asyncio.Semaphore(concurrency)

    async def one(instance: FamilyInstance, sample: int) -> FamilyEpisode:
        async with limit:
            episode = proxy.create_episode(
                task_payload(instance),
                harness=HARNESS,
                metadata={"step": step, "sample": sample, "slot": f"{instance.task_id()}|{HARNESS}|{sample}"},
            )
            workdir = scratch / episode.id
            prepare_workdir(workdir, instance.setup_files)
            plan = faults.arm(
                fault_spec,
                FaultTargets.model_validate(instance.fault_targets),
                faults.fault_key(instance.task_id(), step),
                react,
            )
            timings: dict[str, float] = {}
            try:
                runner = _runner(plan, workdir)
                launched, launched_at = time.monotonic(), time.time()
                transcript = await loop.run_in_executor(
                    executor,
                    lambda: run_agent(
                        url,
                        episode.key,
                        proxy.served_model,
                        instance.instruction,
                        max_steps=react.max_steps,
                        max_tokens=react.max_tokens,
                        tool_runner=jailed_tools(workdir, react.command_timeout_s or 20.0, run_command=runner),
                        emit=_silent,
                        tools=tools,
                        system_prompt=react.system_prompt,
                    ),
                )
                timings["agent_s"] = time.monotonic() - launched
                timings.update(call_timings(proxy.store.call_spans(episode.id), launched_at))
                graded = time.monotonic()
                files = state_check.read_state(str(workdir))
                reward = 1.0 if instance.check(files) else 0.0
                timings["verify_s"] = time.monotonic() - graded
                result = AttemptResult(
                    episode.id,
                    Outcome.passed if reward == 1.0 else Outcome.failed,
                    reward,
                    transcript=transcript,
                    timings=timings,
                )
            except ModelAPIError as e:
                result = AttemptResult(episode.id, Outcome.proxy_error, reason=str(e), transcript={"error": str(e)})
                if e.agent_caused:  # the agent's conversation outgrew the API (the outcome module's rule)
                    agent_failure(result, f"{AGENT_FAULT}: {e}")
            finally:
                proxy.end_episode(episode.id)
                faults.record(proxy.store, episode.id, plan)
                shutil.rmtree(workdir, ignore_errors=True)
            record_outcome(proxy.store, result, final=True)
            return FamilyEpisode(instance, sample, episode.id, result.outcome, result.reward, result.transcript)

    try:
        return list(await asyncio.gather(*(one(i, s) for i in instances for s in range(samples))))
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        shutil.rmtree(scratch, ignore_errors=True)


def _runner(plan: FaultPlan | None, workdir: Path) -> CommandRunner:
    """How the episode's commands run: in the jail, behind its faults when it has any."""
    if plan is None or not plan.active:
        return run_jailed
    apply_setup(plan, workdir)
    return FaultyRunner(plan, run_jailed, workdir)
