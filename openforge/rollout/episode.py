"""One attempt of one harness at one task, in its own sandbox, graded after the harness exits.

Outcome classes (docs/design.md, invariant 5, and `openforge.rollout.outcome`): `passed` / `failed` are the
agent's doing — including what it causes by hanging or crashing: past the agent timeout, or a harness that exits
non-zero after the model answered, is `failed` with reward 0 (`agent timeout: ...` / `agent: ...`). Everything
else is an infrastructure failure, kept out of training and never counted as reward 0, with the reason:

- `sandbox_error`: the sandbox could not be created, or died; or the task's own setup failed (a GUI task's
  service, `openforge.rollout.service`: `task setup: ...`, not retried);
- `proxy_error`: a model call failed in the proxy or backend (recorded with `call_error`);
- `harness_crash`: the harness failed before the model answered once, or says its model API failed;
- `timeout`: the harness hung before the model answered once;
- `verifier_error`: the tests wrote no valid reward, crashed, or timed out, and do so on the task's untouched
  initial state too — where they run without error there, the agent made them fail: `verifier_failed`, graded,
  reward 0 (`openforge.rollout.attribution`).

The episode's key ends the moment the harness exits, before grading: a process the agent left behind can no
longer call the model (its calls are refused, recorded and flagged, never trained on).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from openforge.core import Episode, Outcome, TaskPayload
from openforge.core.json_types import JSONObject
from openforge.faults import FaultPlan, FaultSpec
from openforge.harness import get_adapter
from openforge.harness.base import HarnessAdapter, LaunchContext
from openforge.rollout import faults
from openforge.rollout.attribution import VerifierBaselines
from openforge.rollout.grader import PendingGrader, release
from openforge.rollout.grading import grade, tail
from openforge.rollout.outcome import AgentRun, AttemptResult, agent_failure, call_timings, classify_agent_run
from openforge.rollout.protocols import EpisodeServer
from openforge.rollout.service import TaskServiceError
from openforge.rollout.settings import EpisodeSettings
from openforge.rollout.task_environment import agent_spec_user, make_sandbox_spec
from openforge.rollout.warm_pool import WarmPool, start_episode_sandboxes
from openforge.sandbox import Mount, Sandbox, SandboxError, SandboxProvider, SandboxSpec, sandbox_name
from openforge.tasks import Task
from openforge.tasks.gui_actions import actions_path, load_actions
from openforge.tasks.images import ImageMap
from openforge.tasks.local import LocalEmulationError
from openforge.tasks.solution import SolutionError, solution_script

BUNDLE_TARGET = "/opt/openforge/harnesses"  # where the harness bundle is mounted, read-only
HOME = "/tmp/openforge-home"  # the harness's fresh HOME inside the sandbox


@dataclass(frozen=True)
class Slot:
    """One (task, harness, sample) to fill with a graded episode."""

    task: Task
    harness: str
    sample: int

    @property
    def key(self) -> str:
        return f"{self.task.id}|{self.harness}|{self.sample}"


def solution_command(task: Task, script: Path | None = None) -> str | None:
    """The reference solution (or `script`, e.g. its check) as one shell command, its directory inside it
    (`openforge.tasks.solution`, the same command `tasks validate --run` runs); None when the task has none
    that can be sent."""
    script = script or task.solve_script
    if script is None:
        return None
    try:
        return solution_script(script, task.config.solution.env)
    except SolutionError:  # `openforge tasks validate` names the problem; the oracle reports it missing
        return None


def task_payload(task: Task, adapter: HarnessAdapter) -> TaskPayload:
    """The episode's task as the proxy keeps it; for the oracle teacher, the reference solution and the
    harness's own shell tool."""
    return TaskPayload(
        id=task.id,
        instruction=task.instruction,
        split=task.split,
        family=task.family,
        solution=solution_command(task),
        shell_tool=adapter.shell_tool,
        required_tools=tuple(tools) if (tools := task.config.metadata.required_tools) is not None else None,
        look=solution_command(task, task.look_script) if task.look_script else None,
        check=solution_command(task, task.check_script) if task.check_script else None,
        actions=gui_demonstration(task),
        gui_format=adapter.gui_format,
        start_url=task.gui.start_url if task.gui is not None else None,
    )


def gui_demonstration(task: Task) -> tuple[dict[str, Any], ...] | None:
    """A GUI task's demonstration (`solution/actions.json`) for the oracle; None when it has none that can be
    sent (`openforge tasks validate` names the problem)."""
    try:
        steps = load_actions(actions_path(task.path))
    except SolutionError:
        return None
    return tuple(steps) if steps is not None else None


class EpisodeRunner:
    """Runs attempts against a proxy running in this process (`openforge.proxy.server.RunningProxy`)."""

    def __init__(
        self,
        proxy: EpisodeServer,
        provider: SandboxProvider,
        settings: EpisodeSettings,
        image_map: ImageMap,
        run_label: str,
        bundle_dir: Path | None,
        *,
        step: int = 0,
        fault_spec: FaultSpec | None = None,
    ):
        """`settings`: where and how each episode runs; `step`: the training step written on every episode (and
        part of each task's fault draw); `fault_spec`: the faults injected into the environments."""
        self.proxy = proxy
        self.provider = provider
        self.settings = settings
        self.step = step
        self.fault_spec = fault_spec
        self.image_map = image_map
        self.run_label = run_label
        self.bundle_dir = bundle_dir
        self.baselines = VerifierBaselines(provider, image_map, run_label, proxy.store)
        self._identities: dict[tuple[str, str | None, str | None, str | None], tuple[str, str, str]] = {}
        self.warm: WarmPool | None = None  # sandboxes started ahead of the episodes (`plan_ahead`)
        self._upcoming: Iterable[Slot] = ()

    def adapter(self, harness: str) -> HarnessAdapter:
        return get_adapter(harness, **self.settings.adapter_options(harness))

    async def run(self, slot: Slot, attempt: int, on_created: Callable[[Episode], None] | None = None) -> AttemptResult:
        """`on_created(episode)` runs once the episode exists, before the harness starts (the veRL agent loop
        binds its server client to the episode there)."""
        adapter = self.adapter(slot.harness)
        task = slot.task
        metadata: JSONObject = {
            "slot": slot.key,
            "attempt": attempt,
            "sample": slot.sample,
            "step": self.step,
            "harness_version": self._version(adapter),
        }
        episode = self.proxy.create_episode(task_payload(task, adapter), harness=slot.harness, metadata=metadata)
        if on_created is not None:
            on_created(episode)
        result = AttemptResult(episode.id, Outcome.sandbox_error)
        t0 = time.monotonic()
        sb: Sandbox | None = None
        grader: PendingGrader | None = None  # made while the agent works
        plan = faults.arm(self.fault_spec, faults.task_targets(task), faults.fault_key(task.id, self.step), adapter)
        user = agent_spec_user(task, self.settings.agent_user, self.provider)
        try:
            with tempfile.TemporaryDirectory(prefix="openforge-episode-") as scratch:
                spec = self.sandbox_spec(task, adapter, user, sandbox_name(self.run_label, episode.id[:16]))
                sandboxes = await (
                    self.warm.take(task, spec)
                    if self.warm is not None
                    else start_episode_sandboxes(self.provider, task, spec)
                )
                sb, grader = sandboxes.sandbox, sandboxes.grader
                result.timings["setup_s"] = time.monotonic() - t0
                self.warm_ahead()
                failure = await self._act(adapter, slot, episode, sb, Path(scratch), result, plan)
            if failure is not None and failure[0] is Outcome.failed:
                agent_failure(result, failure[1])
            elif failure is not None:
                result.outcome, result.reason = failure
            else:
                t1 = time.monotonic()
                graded = await grade(task, sb, grader)
                result.timings["verify_s"] = time.monotonic() - t1
                result.timings.update(graded.timings)
                result.grading_notes = graded.notes
                if graded.error or graded.reward is None:  # no reward: the verifier's failure, never a 0
                    result.outcome = Outcome.verifier_error
                    result.reason = graded.error or "the verifier gave no reward"
                elif graded.tampered:  # graded without running the verifier: the agent changed what it runs
                    result.reward, result.outcome, result.reason = 0.0, Outcome.failed, graded.reason
                    result.tampered = graded.tampered
                else:
                    result.reward, result.reason = graded.reward, graded.reason
                    result.outcome = Outcome.passed if graded.reward >= 1.0 else Outcome.failed
        except (SandboxError, LocalEmulationError) as e:
            result.outcome, result.reason = Outcome.sandbox_error, str(e)
        except TaskServiceError as e:  # the task's own setup failed: reported, not retried, never the agent's
            result.outcome, result.reason, result.retry = Outcome.sandbox_error, f"task setup: {e}", False
        finally:
            self.proxy.end_episode(episode.id)
            faults.record(self.proxy.store, episode.id, plan)
            if self.warm is not None:  # destroyed in the background: the slot goes to the next episode
                self.warm.retire(grader, sb)
            elif failed := await release(grader, sb):  # a leak is reported, the run goes on
                result.reason = (result.reason or "") + f" (destroying a sandbox failed: {failed})"
            result.timings["total_s"] = time.monotonic() - t0
        if result.outcome is Outcome.verifier_error:  # the agent's doing, or the infrastructure's?
            await self.baselines.attribute(task, result, user)
        return result

    def sandbox_spec(self, task: Task, adapter: HarnessAdapter, user: str | None, name: str) -> SandboxSpec:
        """The spec of an episode's sandbox: the task's environment, the run's proxy bridge and label, the harness
        bundle mounted, memory for the harness, a lifetime, the agent's user."""
        return make_sandbox_spec(
            task,
            self.image_map,
            name=name,
            run=self.run_label,
            proxy_uds=self.proxy.uds,
            mounts=self._mounts(adapter),
            memory_mb=max(task.resources.memory_mb, adapter.min_memory_mb),
            timeout_s=self._lifetime(task),
            user=user,
        )

    def plan_ahead(self, warm: WarmPool, upcoming: Iterable[Slot]) -> None:
        """Start sandboxes in `warm` for `upcoming` (the slots not started yet, in the order they start), as
        far as the pool has room, now and each time an episode takes its sandbox."""
        self.warm, self._upcoming = warm, upcoming
        self.warm_ahead()

    def warm_ahead(self) -> None:
        warm = self.warm
        if warm is None:
            return
        for slot in self._upcoming:
            if warm.room == 0:
                return
            if warm.reserved(slot.key):  # its sandbox is starting, or another episode of its task took it
                continue
            adapter = self.adapter(slot.harness)
            try:
                user = agent_spec_user(slot.task, self.settings.agent_user, self.provider)
                spec = self.sandbox_spec(slot.task, adapter, user, sandbox_name(self.run_label, "warm"))
            except SandboxError:  # the episode itself reports it (a missing harness bundle)
                continue
            warm.reserve(slot.key, slot.task, spec)

    async def _identity(self, sb: Sandbox, task: Task) -> tuple[str, str, str]:
        """The uid, gid and working directory the harness runs with, asked of the sandbox before the agent's
        turn in one command, once per (task, image, user, workdir): every fresh sandbox of a task starts alike,
        and each command run in a container costs its runtime ~45 ms of CPU."""
        key = (str(task.path), sb.spec.image, sb.spec.user, sb.spec.workdir)
        if key not in self._identities:
            r = await sb.exec(["/bin/sh", "-c", "id -u; id -g; pwd"], timeout_s=30)
            uid, gid, pwd = [*r.stdout.split("\n"), "", "", ""][:3]
            known = (uid.strip() or "0", gid.strip() or "0", sb.spec.workdir or pwd.strip() or "/")
            if not r.ok:
                return known  # not kept: asked again next time
            self._identities[key] = known
        return self._identities[key]

    async def _act(
        self,
        adapter: HarnessAdapter,
        slot: Slot,
        episode: Episode,
        sb: Sandbox,
        scratch: Path,
        result: AttemptResult,
        plan: FaultPlan | None = None,
    ) -> tuple[Outcome, str] | None:
        """Run the harness (with the episode's faults in its environment), then end the episode's key;
        (outcome, reason) for an infrastructure failure or the agent's own (`classify_agent_run`), None when
        the episode is to be graded."""
        uid, gid, workdir = await self._identity(sb, slot.task)
        if sb.proxy_url is None:
            raise SandboxError(f"sandbox {sb.name} has no bridge to the proxy")
        launch = adapter.launch(
            LaunchContext(
                bundle_root=PurePosixPath(BUNDLE_TARGET),
                home=PurePosixPath(HOME),
                workdir=PurePosixPath(workdir),
                base_url=sb.proxy_url,
                key=episode.key,
                model=self.proxy.served_model,
                instruction=slot.task.instruction,
                manifest=self.bundle_dir if adapter.component else None,
                start_url=slot.task.gui.start_url if slot.task.gui is not None else None,
                desktop_socket=slot.task.gui.socket if slot.task.gui is not None else None,
            )
        )
        host_home = scratch / "home"
        launch.write_files(host_home=host_home)
        await sb.copy_in(host_home, HOME, owner=f"{uid}:{gid}")
        timeout = self.settings.agent_timeout_s or slot.task.resources.agent_timeout_s
        env = {**launch.env, **await faults.install(sb, plan, adapter, workdir)}
        t, launched_at = time.monotonic(), time.time()
        try:
            run = await sb.exec(launch.argv, timeout_s=timeout, env=env, workdir=str(launch.cwd))
        finally:
            # the key ends with the harness: whatever the agent left running can no longer reach the model
            self.proxy.end_episode(episode.id)
        result.timings["agent_s"] = time.monotonic() - t
        await faults.collect(sb, plan)
        result.transcript = adapter.parse_transcript(run.stdout)
        result.transcript["exit_code"] = run.exit_code
        calls = [c for c in self.proxy.store.list_calls(episode.id) if not c.metadata.get("late")]
        result.timings.update(call_timings([(c.started_at, c.finished_at) for c in calls], launched_at))
        failed_calls = [c for c in calls if c.call_error]
        status = await sb.status()
        if status.oom_killed:  # the agent's own command hit the memory limit
            result.transcript["oom_killed"] = True
        if run.timed_out:
            result.transcript["timed_out"] = True
        return classify_agent_run(
            AgentRun(
                harness=adapter.name,
                exit_code=run.exit_code,
                timed_out=run.timed_out,
                timeout_s=timeout,
                answered_calls=len(calls) - len(failed_calls),
                failed_call=failed_calls[-1].call_error if failed_calls else None,
                sandbox_alive=status.alive,
                sandbox_reason=status.reason,
                oom_killed=status.oom_killed,
                infrastructure_error=None
                if run.timed_out
                else adapter.infrastructure_error(run.exit_code, run.stdout, run.stderr),
                output_tail=tail(run.stderr or run.stdout, 800),
            )
        )

    def _lifetime(self, task: Task) -> float:
        """The longest a sandbox may live (Kubernetes reaps it after that on its own): setup, the harness and
        the verifier, with a margin; an exec still running then ends `timed_out`."""
        agent = self.settings.agent_timeout_s or task.resources.agent_timeout_s
        return agent + task.resources.verifier_timeout_s + task.resources.build_timeout_s + 300

    def _mounts(self, adapter: HarnessAdapter) -> list[Mount]:
        if adapter.component is None:
            return []
        if self.bundle_dir is None or not (self.bundle_dir / "manifest.json").is_file():
            raise SandboxError(f"harness {adapter.name!r} needs the harness bundle: run `openforge harness install`")
        return [Mount(source=self.bundle_dir, target=BUNDLE_TARGET, read_only=True)]

    def _version(self, adapter: HarnessAdapter) -> str | None:
        try:
            return adapter.version(self.bundle_dir) if adapter.component else adapter.version()
        except Exception:  # noqa: BLE001 - a missing bundle is reported when the sandbox is made
            return None
