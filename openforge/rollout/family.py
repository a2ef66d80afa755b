"""Fast episodes on generated task families: the react harness's own loop, run in this process (one thread
per episode) against a running proxy, its shell commands jailed in a scratch work directory, graded in
memory by the instance's own check (the same comparison its `tests/test.sh` makes).

This is what makes RL on a CPU affordable: a GRPO step needs about a hundred episodes, and a container per
episode would cost more than sampling and training together. The model calls take exactly the path they
take in any rollout (Chat Completions → proxy → renderer with continuity → backend → store), so the
recorded calls are the same training data; only the sandbox is lighter (see `jail.py` for what it
isolates). Tasks that are not generated instances use the orchestrator (`run_rollouts`).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforge.core import Outcome
from openforge.harness.react_agent import ModelAPIError, format_output, run_agent
from openforge.sandbox.local.jail import prepare_workdir, run_jailed
from openforge.tasks import state_check
from openforge.tasks.generator import FamilyInstance

HARNESS = "react"


@dataclass
class FamilyEpisode:
    instance: FamilyInstance
    sample: int
    episode_id: str
    outcome: Outcome
    reward: float | None
    transcript: dict[str, Any] = field(default_factory=dict)


def task_payload(instance: FamilyInstance) -> dict[str, Any]:
    """The episode's task as the proxy keeps it (the oracle reads `solution` and `shell_tool`)."""
    return {
        "id": instance.task_id(),
        "instruction": instance.instruction,
        "family": instance.family,
        "split": instance.split,
        "solution": instance.solution_command,
        "shell_tool": ["bash", "command"],
    }


def jailed_tools(workdir: Path, command_timeout_s: float = 20.0):
    """The react harness's tools, acting only inside `workdir` (bash in the jail; read/write confined)."""
    root = workdir.resolve()

    def inside(path: str) -> Path | None:
        target = (root / str(path).removeprefix("/app/").lstrip("/")).resolve()
        return target if target == root or root in target.parents else None

    def run(name: str, arguments: dict) -> tuple[str, bool]:
        if name == "bash":
            out, err, code = run_jailed(workdir, str(arguments.get("command", "")), command_timeout_s)
            return format_output(out, err, code), False
        if name in ("read", "write"):
            target = inside(arguments.get("path", ""))
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


def _silent(event: dict) -> None:
    return None


async def run_family_episodes(
    proxy,
    instances: list[FamilyInstance],
    samples: int = 1,
    *,
    step: int = 0,
    max_steps: int = 2,
    max_tokens: int = 96,
    concurrency: int = 128,
    tools: list[str] | None = None,
    system_prompt: str | None = None,
) -> list[FamilyEpisode]:
    """`samples` episodes of every instance, concurrently; each recorded by the proxy and graded. `tools` and
    `system_prompt` are the react harness's options of the same names."""
    registry = proxy.service.registry
    model = proxy.service.settings.served_model
    loop = asyncio.get_running_loop()
    scratch = Path(tempfile.mkdtemp(prefix="openforge-family-"))
    scratch.chmod(0o711)  # the jail's user must reach its work directory inside
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="react")
    limit = asyncio.Semaphore(concurrency)

    async def one(instance: FamilyInstance, sample: int) -> FamilyEpisode:
        async with limit:
            episode = registry.create(task=task_payload(instance), harness=HARNESS, metadata={
                "step": step, "sample": sample, "slot": f"{instance.task_id()}|{HARNESS}|{sample}"})
            workdir = scratch / episode.id
            prepare_workdir(workdir, instance.setup_files)
            try:
                transcript = await loop.run_in_executor(
                    executor, lambda: run_agent(proxy.url, episode.key, model, instance.instruction,
                                                max_steps=max_steps, max_tokens=max_tokens,
                                                tool_runner=jailed_tools(workdir), emit=_silent, tools=tools,
                                                system_prompt=system_prompt))
                files = state_check.read_state(str(workdir))
                reward = 1.0 if instance.check(files) else 0.0
                outcome, reason = (Outcome.passed if reward == 1.0 else Outcome.failed), None
            except ModelAPIError as e:
                transcript, reward, outcome, reason = {"error": str(e)}, None, Outcome.proxy_error, str(e)
            finally:
                registry.end(episode.id)
                proxy.service.forget(episode.id)
                shutil.rmtree(workdir, ignore_errors=True)
            registry.store.update_episode(
                episode.id, outcome=outcome, outcome_reason=reason, reward=reward,
                metadata={**episode.metadata, "final": True, "transcript": transcript})
            return FamilyEpisode(instance, sample, episode.id, outcome, reward, transcript)

    try:
        return list(await asyncio.gather(*(one(i, s) for i in instances for s in range(samples))))
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        shutil.rmtree(scratch, ignore_errors=True)


async def pass_at_1(proxy, instances: list[FamilyInstance], **react_options) -> tuple[float, int]:
    """One episode per instance (greedy when the proxy serves at temperature 0): the share that passed, and how
    many were graded. Episodes whose model calls failed are left out, never counted as 0."""
    episodes = await run_family_episodes(proxy, instances, samples=1, **react_options)
    graded = [e.reward for e in episodes if e.reward is not None]
    return sum(graded) / max(1, len(graded)), len(graded)
