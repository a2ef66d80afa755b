"""A GUI task's service: the command of `[environment.gui] service`, run as root in the agent's sandbox once its
environment is set up and before the harness starts (docs/design.md, "GUI tasks"). It starts the task's app as
another user, with its data where the agent's user cannot reach it, and returns once the app answers.

Both paths that bring a sandbox to a task's initial state run it: an episode's (`warm_pool.start_episode_sandboxes`,
warm or not) and `openforge tasks validate --run`'s (`validate`). The grader never does: the verifier reads the
app's data as the agent's turn left it, copied as `[verifier] state_paths`. A service that fails, or a sandbox
whose processes do not outlive a command (the local one), is `TaskServiceError`: the task's setup error, with
the reason, reported once (an episode is not retried for it) and never graded as the agent's.
"""

from __future__ import annotations

from openforge.core.errors import TaskError
from openforge.rollout.grader import ROOT
from openforge.rollout.grading import output_of, tail
from openforge.sandbox import Sandbox
from openforge.tasks.model import Task

__all__ = ["SERVICE_PATH", "TaskServiceError", "check_service_support", "start_task_service"]

SERVICE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class TaskServiceError(TaskError, RuntimeError):
    """A task's `[environment.gui] service` could not start its app in the sandbox; the message says why."""


def check_service_support(sb: Sandbox, task: Task) -> None:
    """TaskServiceError when the task has a service and `sb` cannot keep one running (checked before the task's
    environment is set up, so the reason is this one)."""
    gui = task.gui
    if gui is not None and gui.service and not sb.keeps_services:
        raise TaskServiceError(
            f"task {task.id}: its [environment.gui] service needs a sandbox whose processes outlive the command "
            f"that started them; the {type(sb).__name__} ends them with each command: run GUI tasks in Docker "
            "(--sandbox docker)"
        )


async def start_task_service(sb: Sandbox, task: Task) -> None:
    """Run the task's service, if it has one, as root in `sb` (from `/`, a fixed PATH); TaskServiceError when it
    fails, times out, or `sb` cannot keep a service running."""
    gui = task.gui
    if gui is None or not gui.service:
        return
    check_service_support(sb, task)
    r = await sb.exec(
        ["/bin/sh", "-c", gui.service],
        timeout_s=gui.service_timeout_sec,
        user=ROOT,
        workdir="/",
        env={"PATH": SERVICE_PATH},
    )
    if r.timed_out:
        raise TaskServiceError(
            f"task {task.id}: its service `{gui.service}` did not return within {gui.service_timeout_sec:g}s "
            f"([environment.gui] service_timeout_sec): {tail(output_of(r), 800)}"
        )
    if r.exit_code != 0:
        raise TaskServiceError(
            f"task {task.id}: its service `{gui.service}` failed (exit {r.exit_code}): {tail(output_of(r), 800)}"
        )
