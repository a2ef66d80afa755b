"""Faults meet episodes: draw an episode's faults, put them into its sandbox before the harness starts, read
back what fired, and record it on the episode (`metadata["faults"]`, what the behaviour analytics read).

Inside a sandbox the fault rules run as a shell hook (`openforge.faults.hook`) that each harness's shell
sources before the agent's commands, wired the way that harness runs commands (`HarnessAdapter.command_hook`).
Everything happens in the environment: the model's calls pass through the proxy untouched.
"""

from __future__ import annotations

import json
import shlex
import tempfile
import time
from pathlib import Path

from openforge.faults import FaultPlan, FaultSpec, FaultTargets
from openforge.faults.hook import DECIDE, FAULTS_DIR, HOOK, SHELL, SOURCE, hook_env, hook_files
from openforge.harness.base import HarnessAdapter
from openforge.sandbox import Sandbox
from openforge.store import EpisodeNotFoundError, TrajectoryStore
from openforge.tasks import Task

SETUP_TIMEOUT_S = 60


def fault_key(task_id: str, step: int) -> str:
    """What an episode's faults are drawn from: its task and training step — the same for every sample of a
    task in a step (GRPO groups compare samples in the same environment) and for every harness."""
    return f"{task_id}|{step}"


def task_targets(task: Task) -> FaultTargets:
    return FaultTargets.from_metadata(task.config.metadata.model_extra)


def arm(spec: FaultSpec | None, targets: FaultTargets, key: str, adapter: HarnessAdapter) -> FaultPlan | None:
    """The episode's faults, or None without a spec. A harness that offers no shell (as configured) or that
    has no known hook into its shell cannot meet them: they are recorded as not applicable."""
    if spec is None or not spec.active:
        return None
    reason = None
    if not adapter.offers_shell():
        reason = f"{adapter.name} offers no shell tool as configured"
    elif adapter.command_hook is None:
        reason = f"no known way to hook {adapter.name}'s shell commands"
    return FaultPlan.arm(spec, targets, key, shell=reason)


async def install(sb: Sandbox, plan: FaultPlan | None, adapter: HarnessAdapter, workdir: str) -> dict[str, str]:
    """Put the plan's faults into the sandbox (as root, before the harness starts); the variables to add to the
    harness's environment. Nothing when no fault is armed."""
    if plan is None or not plan.active or adapter.command_hook is None:
        return {}
    check = await sb.exec(["sh", "-c", "command -v python3 && command -v bash"], timeout_s=SETUP_TIMEOUT_S, user="0")
    if check.exit_code != 0:
        plan.not_applicable("the sandbox has no python3 or bash for the fault hook")
        return {}
    hook = adapter.command_hook
    plan.started = time.time()
    state = plan.state(workdir, internal=hook.internal, command_pattern=hook.command)
    with tempfile.TemporaryDirectory(prefix="openforge-faults-") as tmp:
        root = Path(tmp) / "faults"
        root.mkdir()
        for name, content in {**hook_files(FAULTS_DIR), "state.json": json.dumps(state)}.items():
            (root / name).write_text(content)
        await sb.copy_in(root, FAULTS_DIR)
    script = (
        f"chmod 755 {FAULTS_DIR} {FAULTS_DIR}/{SHELL} && chmod 644 {FAULTS_DIR}/{HOOK} {FAULTS_DIR}/{DECIDE} "
        f"{FAULTS_DIR}/{SOURCE} && chmod 666 {FAULTS_DIR}/state.json\n"
        f"cd {shlex.quote(workdir)}\n" + plan.setup_script()
    )
    done = await sb.exec(["bash", "-c", "set -e\n" + script], timeout_s=SETUP_TIMEOUT_S, user="0", workdir="/")
    if done.exit_code != 0:
        plan.not_applicable(f"fault setup failed: {(done.stderr or done.stdout).strip()[-300:]}")
        return {}
    return hook_env(hook.env, FAULTS_DIR)


async def collect(sb: Sandbox, plan: FaultPlan | None) -> None:
    """Read back which faults fired (after the harness exited)."""
    if plan is None or not plan.active:
        return
    r = await sb.exec(["cat", f"{FAULTS_DIR}/state.json"], timeout_s=SETUP_TIMEOUT_S, user="0")
    try:
        plan.update(json.loads(r.stdout))
    except ValueError:
        for record in plan.active:  # the agent destroyed the state: what fired is unknown
            record.reason = "the fault state file was unreadable after the episode"


def record(store: TrajectoryStore, episode_id: str, plan: FaultPlan | None) -> None:
    """The episode's faults on its metadata (`faults`: a list of records, `openforge.faults.plan`)."""
    if plan is None:
        return
    episode = store.get_episode(episode_id)
    if episode is None:
        raise EpisodeNotFoundError(episode_id)
    store.update_episode(episode_id, metadata={**episode.metadata, "faults": plan.to_json()})


__all__ = ["arm", "collect", "fault_key", "install", "record", "task_targets"]
