"""Grading one episode after the agent's turn, where the agent cannot reach (docs/design.md, invariants 5 and
7). Shared by task validation (`openforge.rollout.validate`) and the rollout orchestrator; the task stays data
(`openforge.tasks`), running its verifier in a sandbox is the rollout room's job.

Grading never runs in the agent's sandbox: the verifier, its shell, its interpreter and grading's own scripts run
in a grader (`openforge.rollout.grader`), a fresh sandbox of the task's image made while the agent worked,
into which only the task's state is copied:

1. every process the agent left is stopped (`Sandbox.stop_agent_processes`: out of band where the backend
   can), so nothing it started acts during grading;
2. tamper check, a second line: what changed in the agent's sandbox since it was created
   (`Sandbox.changed_paths`) is judged by `openforge.rollout.tamper`; a tampered sandbox gets reward 0,
   `tampered: PATH`, whatever its verifier says;
3. at the same time, the state — the work area and the task's `[verifier] state_paths` — is copied from the
   agent's sandbox into the grader (`Sandbox.copy_state_to`: tar, links as links, owners and modes kept, at
   most `STATE_MAX_BYTES`: a larger state is the agent's failure, reward 0 with the reason), and steps 4-5 run
   there as soon as it is in (the grader holds nothing the agent can reach, so the verifier may run before the
   check's verdict, which is the slowest step; tampering found cancels it). Once both have read it, the agent's
   sandbox is destroyed. The grader already holds fresh, root-owned `/logs/verifier`, `/tests` and verifier HOME,
   made while the agent worked; the task's tests go into `/tests` with the state (one import);
4. `bash /tests/test.sh` runs in the grader as uid 0 in the work area (from `/` if the agent left no
   directory there) with every capability dropped (`setpriv --bounding-set=-all --inh-caps=-all
   --no-new-privs`, util-linux; where the image has no `setpriv`, the verifier output says so), without a
   login shell, with an environment the agent cannot steer: the task's `[verifier] env` over a fixed `PATH` and
   a fresh `HOME`, and none of the variables in `UNSET` (unless `[verifier] env` sets them);
5. processes the verifier left are stopped; the reward is read from `reward.json` (wins) or `reward.txt` by
   one command in the grader, refusing a symlink, a non-regular file, a symlinked `/logs/verifier` and anything
   over `REWARD_MAX_BYTES`.

Any failure in steps 2-5 other than the sandbox's own (`SandboxError`, the infrastructure's) becomes this
episode's `verifier_error` with the reason: it never escapes to abort a run.
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass, field

from openforge.core.errors import InfrastructureError
from openforge.rollout.grader import ROOT, Grader, PendingGrader
from openforge.rollout.tamper import DEFAULT_VERIFIER_PATH, Tampering, TamperPolicy, tamper_reason
from openforge.sandbox import ExecResult, Sandbox, SandboxError, StateCopy, StateTooLargeError
from openforge.tasks.local import LocalEmulationError
from openforge.tasks.model import TESTS_DIR, VERIFIER_HOME, Task
from openforge.tasks.reward import REWARD_DIR, RewardError, read_reward

__all__ = [
    "Grade",
    "REWARD_MAX_BYTES",
    "STATE_MAX_BYTES",
    "TESTS_DEST",
    "UNSET",
    "VERIFIER_HOME",
    "grade",
    "output_of",
    "tail",
]

TESTS_DEST = TESTS_DIR
REWARD_MAX_BYTES = 1 << 20
STATE_MAX_BYTES = 1 << 30  # the state copied into the grader, as tar: more is the agent's failure (reward 0)
KILLED_BY_SIGNAL = 128  # a shell's exit status for a process killed by signal N is 128 + N
#: Variables that would steer an interpreter or shell the verifier starts; removed unless `[verifier] env` sets
#: them.
UNSET = (
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONINSPECT",
    "PYTHONEXECUTABLE",
    "PYTHONBREAKPOINT",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "CDPATH",
    "SHELLOPTS",
    "BASHOPTS",
    "GLOBIGNORE",
    "PROMPT_COMMAND",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYLIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "GCONV_PATH",
    "HOSTALIASES",
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
)

# Runs the verifier ($1) in the work area ($2): the environment cleaned (`unset` line prepended), capabilities
# dropped where setpriv can.
VERIFIER_SCRIPT = r"""
cd -- "$2" 2>/dev/null || echo "openforge: the work area $2 is not a directory: the verifier runs in /" >&2
while IFS=: read -r key value; do  # shell built-ins only: no capability left to drop (the local sandbox)
  if [ "$key" = CapBnd ]; then case $value in *[!0[:space:]]*) ;; *) exec bash "$1" ;; esac; fi
done < /proc/self/status
if command -v setpriv >/dev/null 2>&1 && setpriv --bounding-set=-all --inh-caps=-all --no-new-privs true 2>/dev/null
then
  exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs -- bash "$1"
fi
echo "openforge: the verifier runs with the sandbox's capabilities: setpriv (util-linux) is missing or refused" >&2
exec bash "$1"
"""

# Checks the verifier's output directory ($1) and reward files without following links: prints per reward file
# present `present NAME SIZE` and, when SIZE is at most $2 bytes, `data NAME BASE64` (its content: one command
# reads it, in the grader, once what the verifier started is stopped), or the problem on stderr with exit 4.
REWARD_CHECK_SCRIPT = r"""
for d in /logs "$1"; do
  if [ -L "$d" ] || [ ! -d "$d" ]; then echo "$d is not a directory (a symlink or replaced)" >&2; exit 4; fi
done
for name in reward.json reward.txt; do
  f="$1/$name"
  if [ -L "$f" ]; then echo "$name is a symbolic link" >&2; exit 4; fi
  [ -e "$f" ] || continue
  if [ ! -f "$f" ]; then echo "$name is not a regular file" >&2; exit 4; fi
  size=$(stat -c %s "$f")
  echo "present $name $size"
  case $size in *[!0-9]*|'') continue ;; esac
  if [ "$size" -le "$2" ]; then echo "data $name $(base64 -w0 < "$f")"; fi
done
"""


@dataclass
class Grade:
    """`reward` when the verifier reported one, or 0.0 without verifying when the agent tampered (`tampered`
    lists the paths) or left a state too large to copy; `reason` then says why. Otherwise `error` says why there
    is none (a verifier failure, never 0). `notes`: what grading could not enforce in this sandbox (e.g. no
    tamper check on a backend that cannot list changes) or left out of the state copy; `timings`: how long
    grading waited for its grader (`grader_wait_s`) and copied the state (`state_copy_s`)."""

    reward: float | None = None
    error: str | None = None
    exit_code: int | None = None
    output: str = ""
    timed_out: bool = False
    tampered: list[str] = field(default_factory=list)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


def output_of(res: ExecResult) -> str:
    return "\n".join(x for x in (res.stdout, res.stderr) if x)


def tail(s: str, n: int = 1500) -> str:
    s = s.strip()
    return s if len(s) <= n else "..." + s[-n:]


def verifier_env(task: Task) -> dict[str, str]:
    """What the verifier's process gets: PATH (the task's, else the default) and a fresh HOME, under the
    task's `[verifier] env`."""
    env = {"PATH": task.config.environment.env.get("PATH", DEFAULT_VERIFIER_PATH), "HOME": VERIFIER_HOME}
    env.update(task.config.verifier.env)
    return env


async def grade(task: Task, sb: Sandbox, grader: PendingGrader, timeout_s: float | None = None) -> Grade:
    """Grade the agent's sandbox `sb` in `grader` as the module docstring says. `SandboxError` (the
    infrastructure failed: `sandbox_error`) and `LocalEmulationError` (the grader could not be set up) propagate;
    any other failure becomes a Grade with `error` (`verifier_error`)."""
    try:
        return await _grade(task, sb, grader, timeout_s or task.resources.verifier_timeout_s)
    except (SandboxError, LocalEmulationError, asyncio.CancelledError):
        raise
    except Exception as e:  # noqa: BLE001 - one episode's grading failure must not end the run (finding 5)
        return Grade(error=f"grading failed: {type(e).__name__}: {e}")


async def _grade(task: Task, sb: Sandbox, pending: PendingGrader, timeout: float) -> Grade:
    await sb.stop_agent_processes()
    t = time.monotonic()
    grader = await pending.get()
    waited = time.monotonic() - t
    env = verifier_env(task)
    notes: list[str] = []
    # The tamper check and the state's copy read the agent's sandbox at once, and the verifier runs in the grader
    # as soon as the state is there: its result counts only when the check finds nothing (the check, `docker
    # diff`, is the slowest step; the grader holds nothing the agent can reach, so running it early is safe).
    checking = asyncio.ensure_future(check_tampering(task, sb, env["PATH"], grader.workdir, notes))
    copying = asyncio.ensure_future(_copy_state(sb, grader, task))
    verifying = asyncio.ensure_future(_verify_copied(copying, task, grader, env, timeout))
    try:
        tampered = await checking
        if tampered is not None:
            copying.cancel()
        await asyncio.wait([copying])
        pending.release_agent()  # read and judged: the agent's sandbox goes while the verifier runs
        if tampered is not None:
            out = Grade(reward=0.0, tampered=[t.path for t in tampered], reason=tamper_reason(tampered))
        else:
            out = await verifying
    finally:
        for task_ in (checking, copying, verifying):
            task_.cancel()
        await asyncio.wait([checking, copying, verifying])
        for task_ in (checking, copying, verifying):  # retrieved: a failure after the verdict is not lost noise
            if not task_.cancelled():
                task_.exception()
    out.notes[:0] = notes
    out.timings["grader_wait_s"] = waited
    return out


async def _copy_state(sb: Sandbox, grader: Grader, task: Task) -> tuple[StateCopy, float]:
    """Step 3: the state into the grader; what was copied and how long it took."""
    if grader.problem is not None:
        raise GraderProblem(grader.problem)
    t = time.monotonic()
    along = (task.tests_dir, TESTS_DIR)  # the tests travel with the state: one copy into the grader
    copied = await sb.copy_state_to(grader.sandbox, grader.roots, max_bytes=STATE_MAX_BYTES, along=along)
    return copied, time.monotonic() - t


async def _verify_copied(
    copying: asyncio.Future[tuple[StateCopy, float]], task: Task, grader: Grader, env: dict[str, str], timeout: float
) -> Grade:
    """Steps 4 and 5 once the state is copied; a state too large is graded 0 without them."""
    out = Grade()
    try:
        copied, took = await asyncio.shield(copying)
    except StateTooLargeError as e:
        out.reward, out.reason = 0.0, f"state too large: {e}"
        return out
    except GraderProblem as e:
        out.error = str(e)
        return out
    out.timings["state_copy_s"] = took
    if copied.dropped:
        out.notes.append("left out of the state copy: " + "; ".join(copied.dropped))
    await _verify(task, grader.sandbox, grader.workdir, env, timeout, out)
    return out


class GraderProblem(InfrastructureError):
    """The task cannot be graded in a grader (`Grader.problem`): the episode's verifier error."""


async def _verify(task: Task, gs: Sandbox, workdir: str, env: dict[str, str], timeout: float, out: Grade) -> None:
    """Steps 4 and 5 in the grader `gs`: the verifier, then its reward."""
    unset = [v for v in UNSET if v not in task.config.verifier.env]
    script = f"unset {' '.join(unset)}\n{VERIFIER_SCRIPT}"
    r = await gs.exec(
        ["/bin/sh", "-c", script, "sh", f"{TESTS_DEST}/test.sh", workdir],
        timeout_s=timeout,
        user=ROOT,
        env=env,
        workdir="/",
    )
    out.exit_code, out.output, out.timed_out = r.exit_code, output_of(r), r.timed_out
    if r.timed_out:
        out.error = f"the verifier timed out after {timeout:g}s"
        return
    if KILLED_BY_SIGNAL < r.exit_code <= KILLED_BY_SIGNAL + 64:
        # a verifier that runs the agent's code (as root) can be killed by it after that code wrote a reward:
        # whatever is in /logs/verifier then is not the verifier's word
        out.error = (
            f"the verifier was killed by signal {r.exit_code - KILLED_BY_SIGNAL} (exit {r.exit_code}): "
            f"its reward is not trusted; verifier output:\n{tail(out.output)}"
        )
        return
    await gs.stop_agent_processes()  # nothing the verifier started may write the reward after it exited
    try:
        out.reward = read_reward(*await read_reward_files(gs))
    except RewardError as e:
        out.error = f"{e} (test.sh exited {r.exit_code}); verifier output:\n{tail(out.output)}"


async def check_tampering(
    task: Task, sb: Sandbox, path: str, workdir: str | None, notes: list[str]
) -> list[Tampering] | None:
    """The tampering found (`tamper.Tampering`s), None when there is none; a backend that cannot list its
    changes gets a note instead."""
    try:
        changes = await sb.changed_paths()
    except NotImplementedError as e:
        notes.append(f"no tamper check: {e}")
        return None
    policy = TamperPolicy.for_verifier(
        path, workdir, task.config.verifier.allowed_changes, recreated=(TESTS_DEST, REWARD_DIR, VERIFIER_HOME)
    )
    lookups = policy.lookups(changes)
    found = policy.judge(changes, {})
    if not found and lookups:  # only an unchanged sandbox is asked in band (its shell is the one it had)
        found = policy.judge(changes, await sb.path_kinds(lookups))
    return found or None


async def read_reward_files(sb: Sandbox) -> tuple[str | None, str | None]:
    """(reward.json text, reward.txt text), None for a file that is absent. RewardError when the directory or
    a file is a link, not a regular file, or larger than REWARD_MAX_BYTES."""
    r = await sb.exec(
        ["/bin/sh", "-c", REWARD_CHECK_SCRIPT, "sh", REWARD_DIR, str(REWARD_MAX_BYTES)],
        timeout_s=60,
        user=ROOT,
        workdir="/",
        env={"PATH": DEFAULT_VERIFIER_PATH},
        output_cap=4 * REWARD_MAX_BYTES,
    )
    if r.exit_code != 0 or r.timed_out or r.truncated:
        raise RewardError(f"the verifier's output is not readable safely: {tail(output_of(r), 300)}")
    present: dict[str, int] = {}
    data: dict[str, str] = {}
    for line in r.stdout.splitlines():
        word, _, rest = line.partition(" ")
        name, _, value = rest.partition(" ")
        if word == "present":
            if not value.isdigit():  # stat failed: say so, never read it as "absent"
                raise RewardError(f"the verifier's {name} could not be measured: {line!r} {tail(r.stderr, 200)}")
            present[name] = int(value)
        elif word == "data":
            data[name] = value
    texts: list[str | None] = []
    for name in ("reward.json", "reward.txt"):  # the script's names, in that order
        if name not in present:
            texts.append(None)
            continue
        if present[name] > REWARD_MAX_BYTES:
            raise RewardError(f"{name}: {present[name]} bytes, more than {REWARD_MAX_BYTES}")
        if name not in data:  # listed, not read: a lost read, not a verifier that wrote nothing
            raise RewardError(f"{name} was listed ({present[name]} bytes) but reading it gave nothing")
        try:
            texts.append(base64.b64decode(data[name], validate=True).decode("utf-8", errors="replace"))
        except ValueError as e:
            raise RewardError(f"{name} could not be read: {e}") from e
    return texts[0], texts[1]
