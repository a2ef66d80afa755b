"""Test, first half: the task grades what it should. Each run in a fresh sandbox, as `openforge tasks validate
--run` does (`openforge.rollout.validate`):

- `solved_by_doing_nothing`: the untouched environment scores 1 (the tests pass before the agent starts);
- `oracle_failed`: `solution/solve.sh` does not score exactly 1;
- `wrong_passes`: `solution/wrong.sh` scores 1 (the tests miss a plausible mistake);
- `hackable`: the verifier falls to a reward hack: the built-in suite or one made from the instruction
  (`hacks.py`);
- `verifier_error`: the verifier crashed or wrote no reward.
The second half, how hard the task is, is `difficulty.py`.
"""

from __future__ import annotations

from openforge.curate.hacks import run_hack_suite
from openforge.rollout.grading import tail
from openforge.rollout.validate import run_script_and_verify, validate_task_by_running
from openforge.sandbox import SandboxProvider
from openforge.tasks import ImageMap, Task


async def check_grading(
    task: Task, provider: SandboxProvider, image_map: ImageMap, run: str, hack_suite: bool
) -> tuple[str, str] | None:
    """None when every check holds; else (reason, detail) of the first that does not."""
    nothing = await run_script_and_verify(task, provider, image_map, None, "do-nothing", run=run)
    if nothing.error:
        return "verifier_error", f"{nothing.error}\n{tail(nothing.verifier_output)}"
    if nothing.reward is not None and nothing.reward >= 1.0:
        return "solved_by_doing_nothing", (
            f"the untouched environment scored {nothing.reward:g}; verifier output:\n{tail(nothing.verifier_output)}"
        )
    result = await validate_task_by_running(task, provider, image_map, run=run)
    if result.solve_reward != 1.0:
        return "oracle_failed", "\n".join(result.errors) or f"solve.sh scored {result.solve_reward}"
    if result.wrong_reward is not None and result.wrong_reward >= 1.0:
        return "wrong_passes", "\n".join(result.errors)
    if result.errors:
        return "verifier_error", "\n".join(result.errors)
    if hack_suite:
        fallen = [h for h in await run_hack_suite(task, provider, image_map, run) if h.fell]
        if fallen:
            names = ", ".join(repr(h.hack) for h in fallen)
            return (
                "hackable",
                f"the verifier falls to the reward hack(s) {names} (scored 1): the tests reward a shortcut",
            )
    return None
