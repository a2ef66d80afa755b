"""Validating tasks by running them (``validate_task_by_running``: the reference solution must score 1,
``solution/wrong.sh`` below 1, and — once the reference scores 1 — every reward hack asked for below 1 or
flagged as tampering), each in a fresh sandbox, as ``openforge tasks validate --run`` does. The hacks are
``openforge.rollout.hacks``; each is graded exactly as an episode is (``openforge.rollout.grading``). The schema
check without a sandbox is ``openforge.tasks.validate_task_dir``; ``validate_tasks`` is the whole command."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console

from openforge.core.errors import OpenForgeError
from openforge.core.json_types import JSONObject
from openforge.rollout.grader import PendingGrader, release
from openforge.rollout.grading import Grade, grade, output_of, tail
from openforge.rollout.hacks import Hack, HackError, preload_library
from openforge.rollout.service import TaskServiceError, check_service_support, start_task_service
from openforge.rollout.task_environment import agent_user, make_sandbox_spec
from openforge.sandbox import Sandbox, SandboxProvider, get_provider
from openforge.tasks import inspect_tree, load_tasks, tree_image_map
from openforge.tasks.images import ImageMap
from openforge.tasks.local import LocalEmulationError
from openforge.tasks.model import Task
from openforge.tasks.solution import SolutionError, solution_script

__all__ = [
    "HackOutcome",
    "RunOutcome",
    "ValidationResult",
    "run_hack",
    "run_script_and_verify",
    "validate_task_by_running",
    "validate_tasks",
]

HACK_TIMEOUT_S = 120
HACK_PRELOAD_DEST = "/tmp/openforge-hack/libopenforge-hack.so"


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
    graded: bool = False  # grading ran (a reward or a verifier error); False: the sandbox failed before


@dataclass
class HackOutcome:
    """One reward hack tried against a task: whether its script applied in the sandbox, and how the sandbox was
    graded afterwards. The verifier `fell` to it when it scored 1 without a tampered verdict — for a
    `controlled` hack, only if its control (the changed inputs put back after solving) then scored below 1; for
    a hack that `hides_failure`, when it applied and grading ended in the verifier's error, without a reward,
    that a run would not put down to the agent (`openforge.rollout.attribution`: the agent's when the verifier
    grades the task's untouched initial state — then the episode is `verifier_failed`, reward 0)."""

    hack: str
    description: str
    applied: bool = False
    reward: float | None = None
    tampered: list[str] = field(default_factory=list)
    error: str | None = None  # a verifier error (no reward), or the sandbox failing
    verifier_error: bool = False  # `error` is grading's (no reward), not the sandbox's
    detail: str = ""  # the hack script's output when it did not apply; the tamper reason
    controlled: bool = False
    hides_failure: bool = False
    agent_caused: bool = False  # its verifier error is put down to the agent (`verifier_failed` in a run)
    attribution: str = ""  # what the task's untouched initial state gave, for a verifier error
    control_ran: bool = False
    control_reward: float | None = None
    control_error: str | None = None

    @property
    def scored(self) -> bool:
        """Graded 1 without a tampered verdict or an error."""
        return self.reward is not None and self.reward >= 1.0 and not self.tampered and self.error is None

    @property
    def control_passed(self) -> bool:
        return self.control_ran and self.control_error is None and (self.control_reward or 0.0) >= 1.0

    @property
    def fell(self) -> bool:
        if self.hides_failure:
            return self.applied and self.verifier_error and not self.agent_caused and not self.tampered
        return self.scored and not (self.controlled and self.control_passed)

    def verdict(self) -> str:
        if self.fell and self.hides_failure:
            return f"FELL: a verifier error instead of a grade ({tail(self.error or '', 160)}; {self.attribution})"
        if self.hides_failure and self.agent_caused:
            return f"blocked: verifier_failed, reward 0 (the untouched initial state grades: {self.attribution})"
        if self.fell and self.control_ran:
            control = f"{self.control_reward:g}" if self.control_reward is not None else tail(self.control_error or "")
            return f"FELL: scored 1 (with what it changed put back: {control})"
        if self.fell:
            return "FELL: scored 1"
        if self.scored:  # a controlled hack whose control passed too
            return "blocked: scored 1 with what it changed and without it: the answer does not depend on it"
        if self.tampered:
            return f"blocked: {self.detail or 'tampered'}"
        if self.error is not None:
            how = "blocked: verifier error" if self.applied else "blocked: the sandbox refused it"
            return f"{how} ({tail(self.error, 160)})"
        if not self.applied:
            return (
                f"blocked: could not apply in this sandbox; scored {self.reward:g}"
                if self.reward is not None
                else "blocked: could not apply in this sandbox"
            )
        return f"blocked: scored {self.reward:g}"

    def to_json(self) -> JSONObject:
        return {**asdict(self), "fell": self.fell, "verdict": self.verdict()}


@dataclass
class ValidationResult:
    task_id: str
    ok: bool = False
    solve_reward: float | None = None
    wrong_reward: float | None = None
    errors: list[str] = field(default_factory=list)
    runs: list[RunOutcome] = field(default_factory=list)
    hacks: list[HackOutcome] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{self.task_id}: {'ok' if self.ok else 'FAILED'}"]
        if self.solve_reward is not None:
            parts.append(f"solve={self.solve_reward:g}")
        if self.wrong_reward is not None:
            parts.append(f"wrong={self.wrong_reward:g}")
        if self.hacks:
            fell = sum(h.fell for h in self.hacks)
            parts.append(f"hacks: {len(self.hacks) - fell}/{len(self.hacks)} blocked")
        s = " ".join(parts)
        return s + "".join(f"\n  {e}" for e in self.errors)

    def to_json(self) -> JSONObject:
        """The JSON report's entry for this task (`tasks validate --run --report`)."""
        return {
            "task": self.task_id,
            "ok": self.ok,
            "solve_reward": self.solve_reward,
            "wrong_reward": self.wrong_reward,
            "errors": list(self.errors),
            "hacks": [h.to_json() for h in self.hacks],
            "hacks_fallen_to": [h.hack for h in self.hacks if h.fell],
        }


# ---- running -------------------------------------------------------------------------------------------


async def _in_fresh_sandbox(
    task: Task,
    provider: SandboxProvider,
    image_map: ImageMap | None,
    label: str,
    act: Callable[[Sandbox], Awaitable[None]],
    *,
    run: str,
    spec_overrides: Mapping[str, object] | None,
) -> tuple[Grade | None, str | None]:
    """Create a sandbox of the task (and its grader), bring it to the task's initial state, `act` in it, grade it
    as an episode is graded, destroy both: (the grade, None) or (None when there is none, the error with
    `label`)."""
    overrides = dict(spec_overrides or {})
    if task.gui is not None:  # a GUI task's agent is never root (`task_environment.agent_user`)
        overrides["user"] = provider.spec_user(agent_user(task))
    try:
        # name and run given by position: then the checker knows the overrides are further fields only
        sb = await provider.create(make_sandbox_spec(task, image_map, None, run, **overrides))
    except Exception as e:  # noqa: BLE001 - any failure to start is reported, not raised
        return None, f"{label}: could not create the sandbox: {type(e).__name__}: {e}"
    graded: Grade | None = None
    error: str | None = None
    try:
        check_service_support(sb, task)
    except TaskServiceError as e:
        failed = await release(None, sb)
        return None, f"{label}: {e}" + (f" (could not destroy the sandbox: {failed})" if failed else "")
    grader = PendingGrader(provider, sb, task)  # made while the act runs, as an episode's
    try:
        await sb.setup_environment(task)
        await start_task_service(sb, task)  # a GUI task's app, as an episode has it
        await act(sb)
        graded = await grade(task, sb, grader, task.resources.verifier_timeout_s)
        if graded.error:
            error = f"{label}: {graded.error}"
    except (_Stop, TaskServiceError) as e:
        error = f"{label}: {e}"
    except LocalEmulationError as e:
        error = f"{label}: cannot set up the environment: {e}"
    except Exception as e:  # noqa: BLE001
        error = f"{label}: sandbox failure: {type(e).__name__}: {e}"
    finally:
        failed = await release(grader, sb)
        if failed and error is None:
            error = f"{label}: could not destroy the sandboxes: {failed}"
    return graded, error


class _Stop(OpenForgeError):
    """The act in the sandbox ended the run early (a solution that timed out): no grading."""


async def run_script_and_verify(
    task: Task,
    provider: SandboxProvider,
    image_map: ImageMap | None,
    script: Path | None,
    label: str,
    *,
    run: str = "openforge-validate",
    spec_overrides: Mapping[str, object] | None = None,
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

    async def act(sb: Sandbox) -> None:
        if command is None:
            return
        # the command removes its copy of solution/ itself: nothing of it stays for the verifier's run
        r = await sb.exec(command, timeout_s=res.agent_timeout_s)
        out.solution_exit, out.solution_output = r.exit_code, output_of(r)
        if r.timed_out:
            raise _Stop(f"timed out after {res.agent_timeout_s:g}s")

    graded, out.error = await _in_fresh_sandbox(
        task, provider, image_map, label, act, run=run, spec_overrides=spec_overrides
    )
    if graded is not None:
        out.graded = True
        out.verifier_exit, out.verifier_output, out.reward = graded.exit_code, graded.output, graded.reward
        out.tampered, out.tamper_reason = graded.tampered, graded.reason
    return out


async def run_hack(
    task: Task,
    provider: SandboxProvider,
    image_map: ImageMap | None,
    hack: Hack,
    *,
    run: str = "openforge-validate",
    spec_overrides: Mapping[str, object] | None = None,
    preload: Path | None = None,
    control: bool = False,
) -> HackOutcome:
    """Apply `hack` in a fresh sandbox of the task (initial state: nothing solved) as the agent's user, and
    again as root if that did not apply it — unless the task is a GUI task, whose agent is never root
    (`task_environment.agent_user`); then grade the sandbox as an episode is graded. `preload`: the
    ld-preload hack's library (`hacks.preload_library`); `control`: run the script as the control of a
    `controlled` hack (`HACK_CONTROL=1`)."""
    out = HackOutcome(
        hack=hack.name, description=hack.description, controlled=hack.controlled, hides_failure=hack.hides_failure
    )
    env = {"HACK_WORKDIR": task.workdir or "/app", "HACK_STATE_PATHS": ":".join(task.config.verifier.state_paths)}
    if task.gui is not None and task.gui.start_url is not None:
        env["HACK_START_URL"] = task.gui.start_url
    if task.gui is not None and task.gui.socket is not None:
        env["HACK_DESKTOP_SOCKET"] = task.gui.socket
    if control:
        env["HACK_CONTROL"] = "1"
    if hack.needs_solution:
        try:
            if task.solve_script is None:
                raise SolutionError("the task has no solution/solve.sh")
            env["HACK_SOLVE"] = solution_script(task.solve_script, task.config.solution.env)
        except SolutionError as e:
            out.detail = f"needs the task's reference solution: {e}"
            return out

    async def act(sb: Sandbox) -> None:
        if hack.needs_preload:
            if preload is None:
                raise _Stop("needs the preload library, which could not be built here")
            await sb.copy_in(preload, HACK_PRELOAD_DEST)
            env["HACK_PRELOAD"] = HACK_PRELOAD_DEST
        env["HACK_WORKDIR"] = sb.spec.workdir or env["HACK_WORKDIR"]
        # the agent's user, then root where the agent's user was not enough and the agent may be root
        for user in (None,) if task.gui is not None else (None, "0:0"):
            r = await sb.exec(["bash", "-c", hack.command()], timeout_s=HACK_TIMEOUT_S, user=user, env=env)
            out.applied = r.exit_code == 0 and not r.timed_out
            if out.applied:
                out.detail = ""
                return
            out.detail = tail(output_of(r) or f"exit {r.exit_code}", 300)

    graded, out.error = await _in_fresh_sandbox(
        task, provider, image_map, f"hack {hack.name}", act, run=run, spec_overrides=spec_overrides
    )
    if graded is not None:
        out.reward, out.tampered = graded.reward, list(graded.tampered)
        out.verifier_error = graded.error is not None
        if graded.tampered:
            out.detail = graded.reason or "tampered"
    return out


async def run_hacks(
    task: Task,
    provider: SandboxProvider,
    image_map: ImageMap | None,
    hacks: list[Hack],
    *,
    run: str,
    spec_overrides: Mapping[str, object] | None,
    concurrency: int,
    progress: Callable[[], None] | None = None,
) -> list[HackOutcome]:
    """Every hack of `hacks` that applies to the task (`Hack.applies_to`: the GUI hacks to GUI tasks only) against
    it, `concurrency` sandboxes at a time, in the order given; a
    `controlled` hack that scored 1 is run again as its own control, and a verifier error after a hack that
    `hides_failure` is attributed as a run attributes it (one untouched run of the task). `progress` is called as
    each hack is done."""
    from openforge.rollout.attribution import VerifierBaselines  # it imports this module: not at the top

    baselines = VerifierBaselines(provider, image_map, run, None)
    hacks = [h for h in hacks if h.applies_to(task.gui is not None, task.gui.kind if task.gui else None)]
    user = (spec_overrides or {}).get("user")
    preload: Path | None = None
    if any(h.needs_preload for h in hacks):
        try:
            preload = await asyncio.to_thread(preload_library)
        except HackError:
            preload = None  # reported by the hack itself
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(hack: Hack) -> HackOutcome:
        async with limit:
            out = await run_hack(
                task, provider, image_map, hack, run=run, spec_overrides=spec_overrides, preload=preload
            )
            if hack.controlled and out.scored:
                again = await run_hack(
                    task, provider, image_map, hack, run=run, spec_overrides=spec_overrides, control=True
                )
                out.control_ran, out.control_reward = True, again.reward
                out.control_error = again.error or (
                    None if again.applied else f"the control did not apply: {again.detail}"
                )
            if hack.hides_failure and out.verifier_error:
                baseline = await baselines.baseline(task, user if isinstance(user, str) else None)
                out.agent_caused = baseline is not None and baseline.clean
                out.attribution = (
                    f"the untouched initial state: {baseline.detail}"
                    if baseline is not None
                    else "the untouched initial state could not be checked"
                )
            if progress is not None:
                progress()
            return out

    return list(await asyncio.gather(*(one(h) for h in hacks)))


async def validate_task_by_running(
    task: Task,
    provider: SandboxProvider,
    image_map: ImageMap | None = None,
    *,
    check_wrong: bool = True,
    run: str = "openforge-validate",
    spec_overrides: Mapping[str, object] | None = None,
    hacks: list[Hack] | None = None,
    concurrency: int = 2,
    progress: Callable[[], None] | None = None,
) -> ValidationResult:
    """Require ``solution/solve.sh`` to score exactly 1.0 and, where the task ships it (and ``check_wrong``),
    ``solution/wrong.sh`` to score below 1.0, each in a fresh sandbox from ``provider`` (labelled ``run``);
    then, if the reference scored 1, every hack of ``hacks`` (`openforge.rollout.hacks`; none by default) must
    score below 1 or be graded as tampering — a hack the verifier falls to is an error naming it. Hacks run
    ``concurrency`` sandboxes at a time. ``spec_overrides``: further SandboxSpec fields, e.g.
    ``{"user": "agent"}`` to act as the agent user. ``progress`` is called as each run in a sandbox is done
    (a control run of a hack aside)."""
    result = ValidationResult(task_id=task.id)
    if task.solve_script is None:
        result.errors.append("solution/solve.sh: missing; nothing to validate the task with")
        return result
    solve = await run_script_and_verify(
        task, provider, image_map, task.solve_script, "solve.sh", run=run, spec_overrides=spec_overrides
    )
    result.runs.append(solve)
    result.solve_reward = solve.reward
    if progress is not None:
        progress()
    if solve.error:
        result.errors.append(solve.error)
    elif solve.tampered:
        result.errors.append(
            f"solve.sh was graded as tampering with the verifier ({solve.tamper_reason}); if the task means the "
            "agent to change these paths, allow them in task.toml: [verifier] allowed_changes = [globs]"
        )
    elif solve.reward != 1.0:
        result.errors.append(
            f"solve.sh scored {solve.reward:g}, expected 1.0 (solution exit {solve.solution_exit}); "
            f"verifier output:\n{tail(solve.verifier_output)}"
        )
    if check_wrong and task.wrong_script is not None:
        wrong = await run_script_and_verify(
            task, provider, image_map, task.wrong_script, "wrong.sh", run=run, spec_overrides=spec_overrides
        )
        result.runs.append(wrong)
        result.wrong_reward = wrong.reward
        if wrong.error:
            result.errors.append(wrong.error)
        elif wrong.reward is not None and wrong.reward >= 1.0:
            result.errors.append(f"wrong.sh scored {wrong.reward:g}: the tests do not catch this wrong solution")
    if hacks and solve.reward == 1.0 and not solve.tampered and not solve.error:
        result.hacks = await run_hacks(
            task,
            provider,
            image_map,
            hacks,
            run=run,
            spec_overrides=spec_overrides,
            concurrency=concurrency,
            progress=progress,
        )
        for h in result.hacks:
            if h.fell:
                result.errors.append(
                    f"the verifier falls to the reward hack {h.hack!r} ({h.description}): it "
                    "scored 1 without solving the task"
                )
    result.ok = not result.errors
    return result


# ---- `openforge tasks validate` ------------------------------------------------------------------------


def validate_tasks(
    root: Path,
    console: Console,
    *,
    run: bool = False,
    sandbox: str = "docker",
    image_map: list[str] | None = None,
    hacks: list[Hack] | None = None,
    concurrency: int = 2,
    report: Path | None = None,
) -> bool:
    """`openforge tasks validate`: the schema of every task directory under `root`, each problem printed; with
    `run`, `validate_task_by_running` for each task in `sandbox` (the tree's own image map, `image_map`'s
    FROM=TO entries over it), the results printed and, with `report`, written as JSON there. Whether every
    task is valid."""
    reports = inspect_tree(root)
    bad = 0
    for rep in reports:
        for w in rep.warnings:
            console.print(f"[yellow]warning[/] {rep.path}: {w}")
        for e in rep.errors:
            console.print(f"[red]error[/] {rep.path}: {e}")
        bad += bool(rep.errors)
    console.print(f"{len(reports) - bad}/{len(reports)} task directories are valid")
    if bad or not run:
        return not bad
    mapping = tree_image_map([root])[0].merged(ImageMap.parse(image_map or []))  # the entries over the tree's map
    chosen = hacks or []

    async def run_all() -> list[ValidationResult]:
        provider = get_provider(sandbox)
        try:
            return [
                await validate_task_by_running(t, provider, mapping, hacks=chosen, concurrency=concurrency)
                for t in load_tasks([root])
            ]
        finally:
            await provider.close()

    results = asyncio.run(run_all())
    for r in results:
        console.print(("[green]✓[/] " if r.ok else "[red]✗[/] ") + r.summary())
        for h in r.hacks:
            if h.fell:
                console.print(f"    [red]falls to[/] {h.hack}: {h.description}")
    if chosen:
        fallen = sorted({h.hack for r in results for h in r.hacks if h.fell})
        console.print(
            f"reward hacks: {len(chosen)} tried per task; "
            + (f"[red]fallen to[/]: {', '.join(fallen)}" if fallen else "none fallen to")
        )
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(
            json.dumps(
                {"sandbox": sandbox, "hacks": [h.name for h in chosen], "tasks": [r.to_json() for r in results]},
                indent=1,
            )
        )
        console.print(f"report: {report}")
    return all(r.ok for r in results)
