"""Build: the candidate's environment is made as an episode's would be — its image built from the Dockerfile
with the image map applied (Docker; cached by content, so the test stage reuses it) or the Dockerfile replayed
(local) — within the task's `build_timeout_sec`. Then the integrity rule: the tests enter a sandbox only after
the agent is done (docs/design.md, invariant 5), so an environment that already holds `/tests` is refused —
files planted there would be mixed into the verifier's own."""

from __future__ import annotations

import asyncio

from openforge.rollout.task_environment import make_sandbox_spec
from openforge.sandbox import Sandbox, SandboxProvider
from openforge.tasks import ImageMap, Task


async def build_environment(
    task: Task, provider: SandboxProvider, image_map: ImageMap, run: str
) -> tuple[str, str] | None:
    """None when the environment builds and is sound; else (reason, detail)."""
    timeout = task.resources.build_timeout_s
    creating = asyncio.ensure_future(provider.create(make_sandbox_spec(task, image_map, run=run)))
    sandbox: Sandbox | None = None
    try:
        done, _ = await asyncio.wait({creating}, timeout=timeout)
        if not done:
            # a build under way cannot be stopped halfway: let it end, then throw away what it made
            sandbox = await _made(creating)
            return "build_timeout", f"the environment did not build within build_timeout_sec = {timeout:g}"
        sandbox = creating.result()
        await sandbox.setup_environment(task, timeout_s=timeout)
        check = await sandbox.exec("test -e /tests", timeout_s=60, user="root", workdir="/")
        if check.exit_code == 0:
            return (
                "integrity",
                "the environment already holds /tests: the verifier's files must enter only after the agent",
            )
    except Exception as e:  # noqa: BLE001 - a failed build is the candidate's, with its log as the evidence
        return "build_failed", f"{type(e).__name__}: {e}"
    finally:
        if sandbox is not None:
            await sandbox.destroy()
    return None


async def _made(creating: asyncio.Future) -> Sandbox | None:
    try:
        return await creating
    except Exception:  # noqa: BLE001 - it failed after all: nothing to throw away
        return None
