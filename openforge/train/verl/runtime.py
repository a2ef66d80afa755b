"""What one veRL agent-loop worker keeps across rollouts: a proxy (started on first use, then reused), its
`VerlServerBackend`, the sandbox provider and an `EpisodeRunner` — the orchestrator's own episode code path
(sandbox, harness, grading, failure classes).

veRL builds a new agent-loop object per rollout, in the worker's event loop, so the runtime lives at module
level, one per event loop (a test's loop, or a Ray actor's).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import tempfile
from collections import Counter
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from openforge.core import CallRecord, Episode
from openforge.harness.bundle import default_bundle_dir
from openforge.proxy.server import ProxyConfig, RunningProxy, running_proxy
from openforge.rollout.episode import EpisodeRunner, Slot
from openforge.rollout.orchestrator import run_label
from openforge.rollout.outcome import AttemptResult, record_outcome
from openforge.rollout.sandbox_choice import choose_sandbox
from openforge.sandbox import SandboxProvider, get_provider
from openforge.tasks import ImageMap, Task, load_task, load_tasks
from openforge.train.stored import stored_episode
from openforge.train.verl.backend import ServerClient, VerlServerBackend
from openforge.train.verl.config import VerlLoopConfig

log = logging.getLogger(__name__)


@dataclass
class EpisodeRun:
    """A finished rollout: its last attempt, and the episode and calls as stored (for the assembler)."""

    result: AttemptResult
    episode: Episode
    calls: list[CallRecord]
    attempts: int


@dataclass
class WorkerRuntime:
    config: VerlLoopConfig
    backend: VerlServerBackend
    stack: AsyncExitStack
    proxy: RunningProxy
    provider: SandboxProvider
    runner: EpisodeRunner
    tasks_by_id: dict[str, Task] | None
    socket_dir: Path
    counters: Counter = field(default_factory=Counter)  # episodes, dropped/<outcome>, samples, ...

    def task(self, task_id: str, task_path: str | None) -> Task:
        if self.tasks_by_id is not None:
            task = self.tasks_by_id.get(task_id)
            if task is None:
                raise KeyError(
                    f"task {task_id!r} of the dataset row is not under the loop's `tasks` "
                    f"({', '.join(map(str, self.config.tasks or []))})"
                )
            return task
        if not task_path:
            raise KeyError(
                f"dataset row of task {task_id!r} has no extra_info.task_path: rebuild the dataset "
                "with `openforge verl dataset`, or set `tasks` in the loop config"
            )
        return load_task(task_path)

    async def run_episode(
        self,
        task: Task,
        harness: str,
        sample: int,
        client: ServerClient,
        sampling_params: Mapping[str, Any],
        metadata: Mapping[str, Any],
    ) -> EpisodeRun:
        """One graded episode (retrying infrastructure failures up to `max_attempts`), its calls sampled by
        veRL's `client` with `sampling_params`; `metadata` (veRL's uid, step, ...) is added to the episode's."""
        store = self.proxy.store
        slot = Slot(task, harness, sample)
        bound: list[str] = []

        def bind(episode: Episode) -> None:
            self.backend.bind(episode.id, client, sampling_params)
            bound.append(episode.id)
            store.update_episode(episode.id, metadata={**episode.metadata, **metadata})

        try:
            for attempt in range(self.config.max_attempts):
                result = await self.runner.run(slot, attempt, on_created=bind)
                final = not result.infrastructure_failure or not result.retry or attempt == self.config.max_attempts - 1
                record_outcome(store, result, final)
                if final:
                    break
                log.warning("retrying %s after %s: %s", slot.key, result.outcome.value, result.reason)
        finally:
            for episode_id in bound:
                self.backend.unbind(episode_id)
        episode = stored_episode(store, result.episode_id)
        return EpisodeRun(result, episode, store.list_calls(episode.id), attempt + 1)

    async def close(self) -> None:
        try:
            await self.stack.aclose()
        finally:
            shutil.rmtree(self.socket_dir, ignore_errors=True)


_runtimes: dict[asyncio.AbstractEventLoop, WorkerRuntime] = {}
_starting: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}


async def worker_runtime(config: VerlLoopConfig, model_dir: Path, max_context: int) -> WorkerRuntime:
    """This event loop's runtime, started on first use with `config` (later calls reuse it as it is)."""
    loop = asyncio.get_running_loop()
    lock = _starting.setdefault(loop, asyncio.Lock())
    async with lock:
        if loop not in _runtimes:
            _runtimes[loop] = await _start(config, model_dir, max_context)
    return _runtimes[loop]


async def close_worker_runtime() -> None:
    """Stop this event loop's proxy and sandbox provider (tests; a Ray worker just exits)."""
    loop = asyncio.get_running_loop()
    _starting.pop(loop, None)
    runtime = _runtimes.pop(loop, None)
    if runtime is not None:
        await runtime.close()


async def _start(config: VerlLoopConfig, model_dir: Path, max_context: int) -> WorkerRuntime:
    from openforge.models import ModelDir

    run = config.run_dir / f"worker-{socket.gethostname()}-{os.getpid()}"
    socket_dir = Path(tempfile.mkdtemp(prefix="openforge-verl-"))  # short: AF_UNIX paths hold ~107 bytes
    backend = VerlServerBackend(max_context, ModelDir(model_dir).eos_token_ids)
    proxy_config = ProxyConfig(
        **config.proxy_settings(),
        model=model_dir,
        backend="verl",
        run=run,
        listen=config.proxy_listen,
        uds=socket_dir / "model.sock",
        admin_listen="127.0.0.1:0",
    )
    sandbox = choose_sandbox(config.sandbox, Console(stderr=True))
    stack = AsyncExitStack()
    try:
        proxy = await stack.enter_async_context(running_proxy(proxy_config, backend=backend))
        provider = get_provider(sandbox, **config.sandbox_options)
        stack.push_async_callback(provider.close)
        label = run_label(run)
        stack.push_async_callback(provider.cleanup, label)
        bundle = config.harness_bundle or default_bundle_dir()
        # the runner takes the loop's episode settings as they are; tasks and harnesses come from the dataset rows
        runner = EpisodeRunner(proxy, provider, config, ImageMap.from_config(config.image_map), label, bundle)
        tasks = {t.id: t for t in load_tasks(config.tasks)} if config.tasks else None
        proxy.store.set_run_info({"verl_agent_loop": config.model_dump(mode="json"), "model": str(model_dir)})
    except BaseException:
        await stack.aclose()
        shutil.rmtree(socket_dir, ignore_errors=True)
        raise
    log.info("openforge agent loop: proxy at %s, run %s, sandbox %s", proxy.url, run, sandbox)
    return WorkerRuntime(config, backend, stack, proxy, provider, runner, tasks, socket_dir)
