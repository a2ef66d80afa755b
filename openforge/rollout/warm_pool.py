"""Warm sandboxes: an episode's sandbox started, and brought to its task's initial state, before the episode asks
for it — with its grader being made beside it (`PendingGrader`) — so that creating either stays off the
episode's path (docs/design.md, "Warm sandboxes").

The orchestrator knows which episodes come next, so the pool is filled ahead of them (`reserve`), not by
guessing: each reservation is a sandbox for one upcoming (task, spec), at most `size` at once. `take` hands an
episode a sandbox of the same task and spec — the spec without its name (every warm sandbox has its own name,
with the run's label, so a crashed run's leftover sweep finds them) — ready (a hit), still starting (a hit
that waited), or, when none was reserved, created there and then (a miss). A sandbox is handed out once and
never comes back: the episode destroys it as before, so a warm sandbox gives the same isolation as a cold one.
Destroying it is off the episode's path too (`retire`): once graded, the episode hands its sandboxes back to be
destroyed in the background and its concurrency slot goes to the next episode. `close` stops what is starting,
destroys what was not taken, and waits for every retired sandbox to be gone (end of a batch, an error, Ctrl-C).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass

from openforge.rollout.grader import PendingGrader, await_creation, release
from openforge.rollout.service import check_service_support, start_task_service
from openforge.sandbox import Sandbox, SandboxProvider, SandboxSpec, sandbox_name
from openforge.tasks import Task

__all__ = ["EpisodeSandboxes", "PoolStats", "WarmPool", "start_episode_sandboxes"]

log = logging.getLogger(__name__)


@dataclass
class PoolStats:
    """What the pool did for a batch: `hits` (taken warm, `waited` of them still starting), `misses` (created on
    demand), `wait_s` (total time episodes waited for their sandbox, hits and misses alike), `peak_live`
    (most warm sandboxes alive, or starting, at once) and `destroy_failures` (retired sandboxes that could not be
    destroyed: logged, and left to the run's leftover sweep)."""

    hits: int = 0
    waited: int = 0
    misses: int = 0
    wait_s: float = 0.0
    peak_live: int = 0
    destroy_failures: int = 0

    @property
    def hit_rate(self) -> float:
        taken = self.hits + self.misses
        return self.hits / taken if taken else 0.0


@dataclass
class EpisodeSandboxes:
    """An episode's sandbox, at its task's initial state, and its grader, being made (or made) beside it."""

    sandbox: Sandbox
    grader: PendingGrader

    async def release(self) -> str | None:
        """Destroy both; what failed, or None."""
        return await release(self.grader, self.sandbox)


async def start_episode_sandboxes(provider: SandboxProvider, task: Task, spec: SandboxSpec) -> EpisodeSandboxes:
    """A new sandbox of `spec` brought to `task`'s initial state — its service running, for a GUI task that has
    one (`service.start_task_service`) — its grader started beside it; destroyed again if that fails or is
    cancelled."""
    sb = await await_creation(provider.create(spec))
    try:
        check_service_support(sb, task)
    except BaseException:
        await asyncio.shield(release(None, sb))
        raise
    grader = PendingGrader(provider, sb, task)
    try:
        await sb.setup_environment(task)
        await start_task_service(sb, task)
    except BaseException:
        await asyncio.shield(release(grader, sb))
        raise
    return EpisodeSandboxes(sb, grader)


def _key(task: Task, spec: SandboxSpec) -> tuple[str, str]:
    return str(task.path), spec.model_dump_json(exclude={"name"})


class WarmPool:
    """Sandboxes started ahead of the episodes of one batch (`size` at most; 0 turns the pool off)."""

    _numbers = itertools.count()  # warm sandboxes' names are unique within a process

    def __init__(self, provider: SandboxProvider, size: int, run_label: str):
        self.provider, self.size, self.run_label = provider, size, run_label
        self.stats = PoolStats()
        self._ready: dict[tuple[str, str], deque[asyncio.Task[EpisodeSandboxes]]] = {}
        self._live: set[asyncio.Task[EpisodeSandboxes]] = set()  # started and not handed out
        self._reserved: set[str] = set()
        self._retiring: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def room(self) -> int:
        """How many more sandboxes may be reserved now."""
        return 0 if self._closed else max(0, self.size - len(self._live))

    def reserved(self, tag: str) -> bool:
        """Whether a sandbox was reserved for `tag` in this batch."""
        return tag in self._reserved

    def reserve(self, tag: str, task: Task, spec: SandboxSpec) -> bool:
        """Start a sandbox for an upcoming episode (`tag` names it: reserving the same tag again does nothing);
        False when the pool is full or closed."""
        if self.reserved(tag):
            return True
        if self.room == 0:
            return False
        self._reserved.add(tag)
        name = sandbox_name(self.run_label, f"warm-{next(self._numbers)}")
        named = spec.model_copy(update={"name": name})
        warming = asyncio.ensure_future(start_episode_sandboxes(self.provider, task, named))
        self._live.add(warming)
        self._ready.setdefault(_key(task, spec), deque()).append(warming)
        self.stats.peak_live = max(self.stats.peak_live, len(self._live))
        return True

    async def take(self, task: Task, spec: SandboxSpec) -> EpisodeSandboxes:
        """A sandbox of `spec` at `task`'s initial state, and its grader, for one episode to use and destroy: warm
        ones when they were reserved for the same task and spec, else new ones. Warm ones that failed to start are
        passed over (new ones are made; if the failure is the infrastructure's, they fail the same way, with their
        own message)."""
        t0 = time.monotonic()
        queue = self._ready.get(_key(task, spec))
        while queue:
            warming = queue.popleft()
            waited = not warming.done()
            try:
                got = await asyncio.shield(warming)  # if this episode is cancelled meanwhile, `close` destroys it
            except Exception:  # noqa: BLE001 - passed over; the episode makes its own below
                self._live.discard(warming)
                continue
            self._live.discard(warming)
            self.stats.hits += 1
            self.stats.waited += waited
            self.stats.wait_s += time.monotonic() - t0
            return got
        got = await start_episode_sandboxes(self.provider, task, spec)
        self.stats.misses += 1
        self.stats.wait_s += time.monotonic() - t0
        return got

    def retire(self, grader: PendingGrader | None, sandbox: Sandbox | None) -> None:
        """Destroy a finished episode's grader and sandbox (either may be None) in the background; `close` waits
        for it. A failure is logged and counted, never lost: the sandbox keeps the run's label for its sweep."""

        async def destroy() -> None:
            failed = await release(grader, sandbox)
            if failed:
                self.stats.destroy_failures += 1
                log.warning("destroying a sandbox failed (the run's leftover sweep removes it): %s", failed)

        retiring = asyncio.ensure_future(destroy())
        self._retiring.add(retiring)
        retiring.add_done_callback(self._retiring.discard)

    async def close(self) -> None:
        """Stop the sandboxes still starting, destroy those not handed out and wait for the retired ones to be
        gone; no reservation is taken after."""
        self._closed = True
        live, self._live = list(self._live), set()
        self._ready.clear()
        for warming in live:
            warming.cancel()
        done = await asyncio.gather(*live, return_exceptions=True)
        await asyncio.gather(*(d.release() for d in done if isinstance(d, EpisodeSandboxes)))
        while self._retiring:  # never cancelled: a destroy under way finishes
            await asyncio.wait(list(self._retiring))
