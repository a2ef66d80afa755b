"""Whose a verifier error is: the agent's or the infrastructure's (docs/design.md, "Outcome classes").

When grading gives an episode no reward — its verifier crashed, timed out, was killed or wrote nothing valid —
the agent may have caused it (it locked the verifier out of the work area with `chmod 000`, its code under test
hangs, it deleted what the tests read), or the task's verifier or the infrastructure failed on their own. A
policy must not hide its failures from training behind the second kind, so the rule is:

    the error is the agent's when the same verifier, run on the task's untouched initial state (a fresh sandbox
    of the task, its environment set up, no agent turn, graded as an episode is), gives a reward.

Then the episode is `verifier_failed`: graded, reward 0, not retried. Otherwise it stays `verifier_error`
(retried, kept out of training), and the reason says what the untouched run found.

The untouched run is made once per task, keyed by the task's content hash (`tasks.digest.task_content_hash`),
and its answer kept for the run: in memory, and in the run's store (`run_info["verifier_baselines"]`), so a
resumed run or a later training step starts no sandbox for it again. Only an answer from a graded run is kept;
when the untouched run's sandbox fails, nothing is kept, the episode stays `verifier_error` and the next
verifier error of that task asks again.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from openforge.core import Outcome
from openforge.rollout.grading import tail
from openforge.rollout.outcome import AttemptResult
from openforge.rollout.validate import run_script_and_verify
from openforge.sandbox import SandboxProvider
from openforge.store import TrajectoryStore
from openforge.tasks.digest import task_content_hash
from openforge.tasks.images import ImageMap
from openforge.tasks.model import Task

__all__ = ["RUN_INFO_KEY", "Baseline", "VerifierBaselines"]

RUN_INFO_KEY = "verifier_baselines"


@dataclass(frozen=True)
class Baseline:
    """What the task's verifier did on the untouched initial state: `clean` when it gave a reward; `detail` the
    reward or the error."""

    clean: bool
    detail: str


class VerifierBaselines:
    """The untouched runs of one run's tasks (the module docstring), made on demand in sandboxes of `provider`
    labelled `run_label`, and kept in memory and in `store`."""

    def __init__(
        self, provider: SandboxProvider, image_map: ImageMap | None, run_label: str, store: TrajectoryStore | None
    ):
        self.provider = provider
        self.image_map = image_map
        self.run_label = run_label
        self.store = store
        self._known: dict[str, Baseline] | None = None  # read from the store on first use
        self._locks: dict[str, asyncio.Lock] = {}

    async def attribute(self, task: Task, result: AttemptResult, user: str | None) -> None:
        """Decide whose `result`'s verifier error is: make it `verifier_failed` (reward 0) when the verifier
        runs without error on the task's untouched initial state, else keep it `verifier_error`; either way
        the reason says which. `user`: the sandbox's user for the agent, as the episode had it."""
        error = result.reason or "the verifier gave no reward"
        started = time.monotonic()
        try:
            baseline = await self.baseline(task, user)
        finally:
            result.timings["attribution_s"] = time.monotonic() - started
        if baseline is None:
            result.reason = f"{error} (not attributed: the untouched initial state could not be checked)"
        elif baseline.clean:
            result.outcome, result.reward = Outcome.verifier_failed, 0.0
            result.reason = (
                f"the agent made the verifier fail: {error} (on the task's untouched initial state it runs "
                f"without error: {baseline.detail})"
            )
        else:
            result.reason = f"{error} (the verifier fails on the task's untouched initial state too: {baseline.detail})"

    async def baseline(self, task: Task, user: str | None) -> Baseline | None:
        """The task's baseline, from the cache or from one untouched run (one at a time per task); None when
        the untouched run's sandbox failed."""
        key = await asyncio.to_thread(task_content_hash, task)
        known = self._cache()
        if key in known:
            return known[key]
        async with self._locks.setdefault(key, asyncio.Lock()):
            if key in known:  # another episode of the task made the run meanwhile
                return known[key]
            found = await self._untouched_run(task, user)
            if found is not None:
                known[key] = found
                self._save(key, found)
            return found

    async def _untouched_run(self, task: Task, user: str | None) -> Baseline | None:
        out = await run_script_and_verify(
            task,
            self.provider,
            self.image_map,
            None,
            "untouched initial state",
            run=self.run_label,
            spec_overrides={"user": user},
        )
        if not out.graded:
            return None
        if out.reward is not None:
            return Baseline(clean=True, detail=f"reward {out.reward:g}")
        return Baseline(clean=False, detail=tail(out.error or "no reward", 500))

    def _cache(self) -> dict[str, Baseline]:
        if self._known is None:
            stored = (self.store.get_run_info().get(RUN_INFO_KEY) if self.store is not None else None) or {}
            self._known = {
                k: Baseline(clean=bool(v.get("clean")), detail=str(v.get("detail", "")))
                for k, v in stored.items()
                if isinstance(v, dict)
            }
        return self._known

    def _save(self, key: str, baseline: Baseline) -> None:
        if self.store is None:
            return
        stored = dict(self.store.get_run_info().get(RUN_INFO_KEY) or {})
        stored[key] = {"clean": baseline.clean, "detail": baseline.detail}
        self.store.set_run_info({RUN_INFO_KEY: stored})
