"""The grader: the fresh sandbox an episode is graded in (docs/design.md, invariant 7). The verifier, its shell, its
interpreter and grading's own scripts run there, from the task's image as built, never from what the agent could
write; only the task's state travels from the agent's sandbox (`grading.grade`).

`PendingGrader` makes it while the agent works, so a second sandbox stays off the episode's critical path: created
from the same environment as the agent's sandbox (`SandboxProvider.create_grader`: Docker the exact image id,
Kubernetes a new pod of the task's image, local a fresh root over the host's read-only system directories), brought
to the task's initial state (`Sandbox.setup_environment`), then prepared before the agent has finished:
`/logs/verifier`, `/tests` and the verifier's HOME made fresh, and the state's paths (`state_roots`: the work area
and `[verifier] state_paths`) removed, for the agent's to be copied in after its turn, with the task's tests (one
import: each copy into a container costs its daemon ~75 ms of CPU). It holds nothing of the agent's until then, has
no network and no proxy bridge, and is destroyed on every path (`PendingGrader.close`: errors, timeouts, Ctrl-C); a
crash leaves it with the run's label, for the run's leftover sweep (`SandboxProvider.cleanup`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass

from openforge.sandbox import Sandbox, SandboxError, SandboxProvider, state_roots
from openforge.tasks.model import RESERVED_PATHS, TESTS_DIR, VERIFIER_HOME, Task, overlaps
from openforge.tasks.reward import REWARD_DIR

__all__ = ["ROOT", "Grader", "PendingGrader", "await_creation", "fresh_dirs", "release", "task_state_paths"]

ROOT = "0:0"  # numeric: a name would be looked up in the sandbox's /etc/passwd
FRESH_DIRS_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Removes each argument before `--` (recursively; a link itself, never what it points to), then makes each argument
# MODE:DIR after it a fresh, empty, root-owned directory: a symlinked or non-directory component on the way is
# removed (never followed), what is there is removed, and the result checked.
FRESH_DIRS_SCRIPT = r"""
set -u
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
  rm -rf -- "$1" || { echo "cannot remove $1" >&2; exit 4; }
  shift
done
shift
for arg; do
  MODE=${arg%%:*} dir=${arg#*:}
  cur=
  for part in $(printf '%s' "$dir" | tr '/' ' '); do
    cur="$cur/$part"
    if [ -L "$cur" ] || { [ -e "$cur" ] && [ ! -d "$cur" ]; }; then rm -f -- "$cur" || exit 3; fi
  done
  rm -rf -- "$dir" || { echo "cannot remove $dir" >&2; exit 3; }
  if [ -e "$dir" ] || [ -L "$dir" ]; then echo "$dir is still there after removing it" >&2; exit 3; fi
  mkdir -p -m "$MODE" -- "$dir" && chown 0:0 -- "$dir" && chmod "$MODE" -- "$dir" || exit 3
  if [ -L "$dir" ] || [ ! -d "$dir" ] || [ "$(stat -c %u "$dir")" != 0 ]; then
    echo "$dir is not a root-owned directory after creating it" >&2; exit 3
  fi
done
"""


@dataclass
class Grader:
    """A prepared grader: its sandbox, the work area (as the task's image has it), the state's paths copied in
    from the agent's sandbox, and `problem`: why the task cannot be graded this way (None when it can)."""

    sandbox: Sandbox
    workdir: str
    roots: list[str]
    problem: str | None = None


def task_state_paths(task: Task, workdir: str) -> list[str]:
    """The paths copied from the agent's sandbox into the grader: the work area and `[verifier] state_paths`,
    without those inside another."""
    return state_roots([workdir, *task.config.verifier.state_paths])


async def await_creation(creating: Awaitable[Sandbox]) -> Sandbox:
    """A sandbox being created; if cancelled meanwhile (Ctrl-C), wait for the creation under way in the
    provider's thread and destroy what it made, so nothing is left behind."""
    making = asyncio.ensure_future(creating)
    try:
        return await asyncio.shield(making)
    except asyncio.CancelledError:
        try:
            made = await making
        except Exception:  # noqa: BLE001 - nothing was made
            raise asyncio.CancelledError from None
        await made.destroy()
        raise


async def fresh_dirs(sb: Sandbox, dirs: dict[str, str], remove: list[str] | None = None) -> None:
    """Remove `remove` (`Sandbox.remove_paths`), then make each of `dirs` (path: mode) a fresh, empty, root-owned
    directory with that mode (FRESH_DIRS_SCRIPT): one command where the backend removes by a root command
    (`Sandbox.removes_by_exec`; each command run in a container costs its runtime ~45 ms of CPU). SandboxError if
    a path cannot be removed, RuntimeError if a directory cannot be made."""
    remove = remove or []
    if remove and not sb.removes_by_exec:
        await sb.remove_paths(remove)
        remove = []
    r = await sb.exec(
        ["/bin/sh", "-c", FRESH_DIRS_SCRIPT, "sh", *remove, "--", *(f"{mode}:{d}" for d, mode in dirs.items())],
        timeout_s=300,
        user=ROOT,
        workdir="/",
        env={"PATH": FRESH_DIRS_PATH},
    )
    if r.exit_code == 4 and not r.timed_out:  # as `remove_paths` says it
        raise SandboxError(f"sandbox {sb.name}: cannot remove {', '.join(remove)}: {r.stderr.strip()[-500:]}")
    if r.exit_code != 0 or r.timed_out:
        out = "\n".join(x for x in (r.stdout, r.stderr) if x).strip()[-500:]
        raise RuntimeError(f"could not create {', '.join(dirs)} fresh: {out or r.exit_code}")


class PendingGrader:
    """The grader of one episode, made in the background from the moment the agent's sandbox exists: `get()`
    waits for it, `close()` destroys it (or what of it exists), whatever happened."""

    def __init__(self, provider: SandboxProvider, agent: Sandbox, task: Task):
        self._provider, self._agent, self._task = provider, agent, task
        self._sandbox: Sandbox | None = None
        self._agent_released: asyncio.Future[None] | None = None
        self._making = asyncio.ensure_future(self._make())

    async def get(self) -> Grader:
        """The prepared grader; raises what making it raised (`SandboxError`: the infrastructure's)."""
        return await asyncio.shield(self._making)

    def release_agent(self) -> None:
        """Start destroying the agent's sandbox (its state is copied and judged); `close` waits for it."""
        if self._agent_released is None:
            self._agent_released = asyncio.ensure_future(self._agent.destroy())

    async def close(self) -> None:
        """Stop making the grader if it is still being made, destroy it, and wait for the agent's sandbox to be
        gone if `release_agent` started that; raises the first failure."""
        self._making.cancel()
        await asyncio.wait([self._making])
        if not self._making.cancelled():
            self._making.exception()  # retrieved: a failure no one waited for is not logged as lost
        done = await asyncio.gather(
            self._sandbox.destroy() if self._sandbox is not None else asyncio.sleep(0),
            self._agent_released if self._agent_released is not None else asyncio.sleep(0),
            return_exceptions=True,
        )
        for e in done:
            if isinstance(e, BaseException):
                raise e

    async def _make(self) -> Grader:
        sb = self._sandbox = await await_creation(self._provider.create_grader(self._agent))
        await sb.setup_environment(self._task)
        workdir = sb.spec.workdir or (await sb.exec(["pwd"], timeout_s=60, user=ROOT)).stdout.strip() or "/"
        clash = next((r for r in RESERVED_PATHS if overlaps(workdir, r)), None)
        if clash is not None:
            return Grader(
                sb,
                workdir,
                [],
                f"the work area {workdir} overlaps {clash}: grading cannot copy it into "
                "a fresh sandbox; give the task its own working directory (WORKDIR or [environment] workdir)",
            )
        roots = task_state_paths(self._task, workdir)
        # the state's paths removed (the agent's take their place after its turn) and grading's made fresh
        await fresh_dirs(sb, {REWARD_DIR: "0755", TESTS_DIR: "0755", VERIFIER_HOME: "0700"}, remove=roots)
        return Grader(sb, workdir, roots)


async def release(grader: PendingGrader | None, sandbox: Sandbox | None) -> str | None:
    """Destroy an episode's grader and sandbox (either may be None), both at once; what failed, or None."""
    done = await asyncio.gather(
        grader.close() if grader else asyncio.sleep(0),
        sandbox.destroy() if sandbox else asyncio.sleep(0),
        return_exceptions=True,
    )
    failed = [f"{type(e).__name__}: {e}" for e in done if isinstance(e, Exception)]
    return "; ".join(failed) or None
