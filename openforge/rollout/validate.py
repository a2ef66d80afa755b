"""Validating tasks by running them (``validate_task_by_running``: the reference solution must score 1,
``solution/wrong.sh`` below 1), each in a fresh sandbox, as ``openforge tasks validate --run`` does. The schema
check without a sandbox is ``openforge.tasks.validate_task_dir``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforge.rollout.grading import grade, output_of, tail
from openforge.rollout.task_environment import make_sandbox_spec, setup_environment
from openforge.sandbox import SandboxProvider
from openforge.tasks.images import ImageMap
from openforge.tasks.local import LocalEmulationError
from openforge.tasks.model import Task
from openforge.tasks.solution import SolutionError, solution_script

__all__ = ["RunOutcome", "ValidationResult", "run_script_and_verify", "validate_task_by_running"]


@dataclass
class RunOutcome:
    """One sandbox run of a solution script followed by the verifier."""

    script: str
    reward: float | None = None
    error: str | None = None
    solution_exit: int | None = None
    verifier_exit: int | None = None
    solution_output: str = ""
    verifier_output: str = ""
    tampered: list[str] = field(default_factory=list)  # what the tamper check found (the reward is then 0)
    tamper_reason: str | None = None


@dataclass
class ValidationResult:
    task_id: str
    ok: bool = False
    solve_reward: float | None = None
    wrong_reward: float | None = None
    errors: list[str] = field(default_factory=list)
    runs: list[RunOutcome] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{self.task_id}: {'ok' if self.ok else 'FAILED'}"]
        if self.solve_reward is not None:
            parts.append(f"solve={self.solve_reward:g}")
        if self.wrong_reward is not None:
            parts.append(f"wrong={self.wrong_reward:g}")
        s = " ".join(parts)
        return s + "".join(f"\n  {e}" for e in self.errors)


# ---- running -------------------------------------------------------------------------------------------


async def run_script_and_verify(
    task: Task, provider: SandboxProvider, image_map: ImageMap | None, script: Path | None, label: str,
    *, run: str = "openforge-validate", spec_overrides: dict[str, Any] | None = None,
) -> RunOutcome:
    """In a fresh sandbox: run ``script`` with the files of its directory beside it, in the workdir and as the
    agent user, as the oracle teacher does (the same command, ``openforge.tasks.solution``; ``script=None``:
    run nothing); then grade the sandbox as an episode is graded (``openforge.rollout.grading``: processes
    stopped, tamper check, fresh ``/logs/verifier`` and ``/tests``, the verifier as root without capabilities,
    the reward read safely)."""
    out = RunOutcome(script=label)
    res = task.resources
    try:
        command = solution_script(script, task.config.solution.env) if script is not None else None
    except SolutionError as e:
        out.error = f"{label}: {e}"
        return out
    try:
        sb = await provider.create(make_sandbox_spec(task, image_map, run=run, **(spec_overrides or {})))
    except Exception as e:  # noqa: BLE001 - any failure to start is reported, not raised
        out.error = f"{label}: could not create the sandbox: {type(e).__name__}: {e}"
        return out
    try:
        await setup_environment(task, sb, provider)
        if command is not None:
            # the command removes its copy of solution/ itself: nothing of it stays for the verifier's run
            r = await sb.exec(command, timeout_s=res.agent_timeout_s)
            out.solution_exit, out.solution_output = r.exit_code, output_of(r)
            if r.timed_out:
                out.error = f"{label}: timed out after {res.agent_timeout_s:g}s"
                return out
        graded = await grade(task, sb, res.verifier_timeout_s)
        out.verifier_exit, out.verifier_output, out.reward = graded.exit_code, graded.output, graded.reward
        out.tampered, out.tamper_reason = graded.tampered, graded.reason
        if graded.error:
            out.error = f"{label}: {graded.error}"
    except LocalEmulationError as e:
        out.error = f"{label}: cannot set up the environment: {e}"
    except Exception as e:  # noqa: BLE001
        out.error = f"{label}: sandbox failure: {type(e).__name__}: {e}"
    finally:
        try:
            await sb.destroy()
        except Exception as e:  # noqa: BLE001
            if out.error is None:
                out.error = f"{label}: could not destroy the sandbox: {type(e).__name__}: {e}"
    return out


async def validate_task_by_running(
    task: Task, provider: SandboxProvider, image_map: ImageMap | None = None, *, check_wrong: bool = True,
    run: str = "openforge-validate", spec_overrides: dict[str, Any] | None = None,
) -> ValidationResult:
    """Require ``solution/solve.sh`` to score exactly 1.0 and, where the task ships it (and ``check_wrong``),
    ``solution/wrong.sh`` to score below 1.0, each in a fresh sandbox from ``provider`` (labelled ``run``).
    ``spec_overrides``: further SandboxSpec fields, e.g. ``{"user": "agent"}`` to act as the agent user."""
    result = ValidationResult(task_id=task.id)
    if task.solve_script is None:
        result.errors.append("solution/solve.sh: missing; nothing to validate the task with")
        return result
    solve = await run_script_and_verify(task, provider, image_map, task.solve_script, "solve.sh", run=run,
                                       spec_overrides=spec_overrides)
    result.runs.append(solve)
    result.solve_reward = solve.reward
    if solve.error:
        result.errors.append(solve.error)
    elif solve.tampered:
        result.errors.append(
            f"solve.sh was graded as tampering with the verifier ({solve.tamper_reason}); if the task means the "
            "agent to change these paths, allow them in task.toml: [verifier] allowed_changes = [globs]")
    elif solve.reward != 1.0:
        result.errors.append(
            f"solve.sh scored {solve.reward:g}, expected 1.0 (solution exit {solve.solution_exit}); "
            f"verifier output:\n{tail(solve.verifier_output)}"
        )
    if check_wrong and task.wrong_script is not None:
        wrong = await run_script_and_verify(task, provider, image_map, task.wrong_script, "wrong.sh", run=run,
                                           spec_overrides=spec_overrides)
        result.runs.append(wrong)
        result.wrong_reward = wrong.reward
        if wrong.error:
            result.errors.append(wrong.error)
        elif wrong.reward is not None and wrong.reward >= 1.0:
            result.errors.append(f"wrong.sh scored {wrong.reward:g}: the tests do not catch this wrong solution")
    result.ok = not result.errors
    return result
