"""Faults for the in-process react episodes: the jail's command runner, wrapped.

The in-process episodes (`openforge.rollout.family`) run each of the agent's bash commands in the jail
(`openforge.sandbox.local.jail.run_jailed`). Here the same rules as in a sandbox (`rules.py`) decide first:
the command runs, fails with the fault's message, or hangs until the jail's own command timeout kills it.
The environment faults (a missing directory, a read-only file, a full disk) are put in place in the host
work directory before the first command, by the same setup script a sandbox runs.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from openforge.core.errors import InfrastructureError
from openforge.faults.plan import FaultPlan
from openforge.faults.rules import decide

# (work directory, command, timeout) -> (stdout, stderr, exit code): how a command runs (the jail's runner)
CommandRunner = Callable[[Path, str, float], tuple[str, str, int]]

AGENT_VIEW = "/app"  # where the jail shows the work directory to the agent's commands


class FaultSetupError(InfrastructureError, RuntimeError):
    """The setup script of an episode's faults failed in its work directory."""


def apply_setup(plan: FaultPlan, workdir: Path) -> None:
    """Put the plan's environment faults in place in `workdir` (a host directory), as root."""
    script = plan.setup_script()
    if not script:
        return
    done = subprocess.run(["bash", "-c", "set -e\n" + script], cwd=workdir, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise FaultSetupError(f"fault setup failed in {workdir}: {done.stderr.strip()[-500:]}")


class FaultyRunner:
    """A command runner that asks the fault rules before each command (one episode's; thread-safe)."""

    def __init__(self, plan: FaultPlan, run: CommandRunner, workdir: Path):
        self.plan = plan
        self.run = run
        self.state = plan.state(str(workdir.resolve()), views=(AGENT_VIEW,))
        self._lock = threading.Lock()

    def __call__(self, workdir: Path, command: str, timeout_s: float) -> tuple[str, str, int]:
        with self._lock:
            action, arg, message = decide(self.state, command)
            self.plan.update(self.state)
        if action == "fail":
            return "", message + "\n", int(arg)
        if action == "hang":  # the jail's own timeout ends it, as a harness's command timeout would
            return self.run(workdir, f"sleep {float(arg):g}", timeout_s)
        return self.run(workdir, command, timeout_s)


__all__ = ["AGENT_VIEW", "CommandRunner", "FaultSetupError", "FaultyRunner", "apply_setup"]
