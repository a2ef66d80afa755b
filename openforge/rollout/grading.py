"""Grading one sandbox after the agent's turn, where the agent cannot reach (docs/design.md, invariants 5 and
7). Shared by task validation (`openforge.rollout.validate`) and the rollout orchestrator; the task stays data
(`openforge.tasks`), running its verifier in a sandbox is the rollout room's job.

In order:

1. every process the agent left is stopped (`Sandbox.stop_agent_processes`: out of band where the backend
   can), so nothing it started acts during grading;
2. tamper check: what changed in the sandbox since it was created (`Sandbox.changed_paths`) is judged by
   `openforge.rollout.tamper`; a tampered sandbox is not verified at all: reward 0, `tampered: PATH`;
3. `/logs/verifier`, `/tests` and the verifier's HOME are created fresh by root: whatever is there (a
   directory, a file, a symlink to elsewhere, a symlinked parent) is removed without following links, the
   removal checked, and a root-owned directory made; the task's `tests/` is copied into `/tests`;
4. `bash /tests/test.sh` runs as uid 0 in the working directory with every capability dropped
   (`setpriv --bounding-set=-all --inh-caps=-all --no-new-privs`, util-linux; where the image has no
   `setpriv`, the verifier output says so), without a login shell, with an environment the agent cannot steer:
   the task's `[verifier] env` over a fixed `PATH` and a fresh `HOME`, and none of the variables in `UNSET`
   (unless `[verifier] env` sets them);
5. processes the verifier left are stopped; the reward is read from `reward.json` (wins) or `reward.txt`,
   refusing a symlink, a non-regular file, a symlinked `/logs/verifier` and anything over `REWARD_MAX_BYTES`.

Any failure in steps 2-5 other than the sandbox's own (`SandboxError`, the infrastructure's) becomes this
episode's `verifier_error` with the reason: it never escapes to abort a run.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from openforge.rollout.tamper import DEFAULT_VERIFIER_PATH, Tampering, TamperPolicy, tamper_reason
from openforge.sandbox import ExecResult, Sandbox, SandboxError
from openforge.tasks.model import Task
from openforge.tasks.reward import REWARD_DIR, REWARD_JSON, REWARD_TXT, RewardError, read_reward

__all__ = ["Grade", "REWARD_MAX_BYTES", "TESTS_DEST", "UNSET", "VERIFIER_HOME", "grade", "output_of", "tail"]

TESTS_DEST = "/tests"
VERIFIER_HOME = "/tmp/openforge-verifier-home"
REWARD_MAX_BYTES = 1 << 20
KILLED_BY_SIGNAL = 128  # a shell's exit status for a process killed by signal N is 128 + N
ROOT = "0:0"  # numeric: a name would be looked up in the sandbox's /etc/passwd, which the agent may have edited
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

# Makes each argument a fresh, empty, root-owned directory (mode from $MODE): a symlinked or non-directory
# component on the way is removed (never followed), what is there is removed, and the result checked.
FRESH_DIRS_SCRIPT = r"""
set -u
for dir; do
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

# Runs the verifier: the environment cleaned (`unset` line prepended), capabilities dropped where setpriv can.
VERIFIER_SCRIPT = r"""
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

# Checks the verifier's output directory and reward files without following links: prints one line per reward
# file present (`present NAME SIZE`), or the problem on stderr with exit 4.
REWARD_CHECK_SCRIPT = r"""
for d in /logs "$1"; do
  if [ -L "$d" ] || [ ! -d "$d" ]; then echo "$d is not a directory (a symlink or replaced)" >&2; exit 4; fi
done
for name in reward.json reward.txt; do
  f="$1/$name"
  if [ -L "$f" ]; then echo "$name is a symbolic link" >&2; exit 4; fi
  [ -e "$f" ] || continue
  if [ ! -f "$f" ]; then echo "$name is not a regular file" >&2; exit 4; fi
  echo "present $name $(stat -c %s "$f")"
done
"""


@dataclass
class Grade:
    """`reward` when the verifier reported one (0.0 when the agent tampered: `tampered` lists the paths and
    `reason` says why); otherwise `error` says why there is none (a verifier failure, never 0). `notes`: what
    grading could not enforce in this sandbox (e.g. no tamper check on a backend that cannot list changes)."""

    reward: float | None = None
    error: str | None = None
    exit_code: int | None = None
    output: str = ""
    timed_out: bool = False
    tampered: list[str] = field(default_factory=list)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


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


async def grade(task: Task, sb: Sandbox, timeout_s: float | None = None) -> Grade:
    """Grade the sandbox as the module docstring says. `SandboxError` propagates (the infrastructure failed:
    `sandbox_error`); any other failure becomes a Grade with `error` (`verifier_error`)."""
    try:
        return await _grade(task, sb, timeout_s or task.resources.verifier_timeout_s)
    except (SandboxError, asyncio.CancelledError):
        raise
    except Exception as e:  # noqa: BLE001 - one episode's grading failure must not end the run (finding 5)
        return Grade(error=f"grading failed: {type(e).__name__}: {e}")


async def _grade(task: Task, sb: Sandbox, timeout: float) -> Grade:
    out = Grade()
    await sb.stop_agent_processes()
    env = verifier_env(task)
    workdir = sb.spec.workdir
    tampered = await check_tampering(task, sb, env["PATH"], workdir, out.notes)
    if tampered is not None:
        out.reward, out.tampered, out.reason = 0.0, [t.path for t in tampered], tamper_reason(tampered)
        return out
    await fresh_dirs(sb, [REWARD_DIR, TESTS_DEST], "0755")
    await fresh_dirs(sb, [VERIFIER_HOME], "0700")
    await sb.copy_in(task.tests_dir, TESTS_DEST)
    unset = [v for v in UNSET if v not in task.config.verifier.env]
    script = f"unset {' '.join(unset)}\n{VERIFIER_SCRIPT}"
    r = await sb.exec(
        ["/bin/sh", "-c", script, "sh", f"{TESTS_DEST}/test.sh"], timeout_s=timeout, user=ROOT, env=env, workdir=workdir
    )
    out.exit_code, out.output, out.timed_out = r.exit_code, output_of(r), r.timed_out
    if r.timed_out:
        out.error = f"the verifier timed out after {timeout:g}s"
        return out
    if KILLED_BY_SIGNAL < r.exit_code <= KILLED_BY_SIGNAL + 64:
        # a verifier that runs the agent's code (as root) can be killed by it after that code wrote a reward:
        # whatever is in /logs/verifier then is not the verifier's word
        out.error = (
            f"the verifier was killed by signal {r.exit_code - KILLED_BY_SIGNAL} (exit {r.exit_code}): "
            f"its reward is not trusted; verifier output:\n{tail(out.output)}"
        )
        return out
    await sb.stop_agent_processes()  # nothing the verifier started may write the reward after it exited
    try:
        out.reward = read_reward(*await read_reward_files(sb))
    except RewardError as e:
        out.error = f"{e} (test.sh exited {r.exit_code}); verifier output:\n{tail(out.output)}"
    return out


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


async def fresh_dirs(sb: Sandbox, dirs: list[str], mode: str) -> None:
    """Make each of `dirs` a fresh, empty, root-owned directory (FRESH_DIRS_SCRIPT); RuntimeError if it cannot."""
    r = await sb.exec(
        ["/bin/sh", "-c", FRESH_DIRS_SCRIPT, "sh", *dirs],
        timeout_s=120,
        user=ROOT,
        workdir="/",
        env={"MODE": mode, "PATH": DEFAULT_VERIFIER_PATH},
    )
    if r.exit_code != 0 or r.timed_out:
        raise RuntimeError(f"could not create {', '.join(dirs)} fresh: {tail(output_of(r), 500) or r.exit_code}")


async def read_reward_files(sb: Sandbox) -> tuple[str | None, str | None]:
    """(reward.json text, reward.txt text), None for a file that is absent. RewardError when the directory or
    a file is a link, not a regular file, or larger than REWARD_MAX_BYTES."""
    r = await sb.exec(
        ["/bin/sh", "-c", REWARD_CHECK_SCRIPT, "sh", REWARD_DIR],
        timeout_s=60,
        user=ROOT,
        workdir="/",
        env={"PATH": DEFAULT_VERIFIER_PATH},
    )
    if r.exit_code != 0 or r.timed_out:
        raise RewardError(f"the verifier's output is not readable safely: {tail(output_of(r), 300)}")
    present: dict[str, int] = {}
    for line in r.stdout.splitlines():
        word, _, rest = line.partition(" ")
        name, _, size = rest.partition(" ")
        if word == "present":
            if not size.isdigit():  # stat failed: say so, never read it as "absent"
                raise RewardError(f"the verifier's {name} could not be measured: {line!r} {tail(r.stderr, 200)}")
            present[name] = int(size)
    texts: list[str | None] = []
    for name, path in (("reward.json", REWARD_JSON), ("reward.txt", REWARD_TXT)):
        if name not in present:
            texts.append(None)
            continue
        if present[name] > REWARD_MAX_BYTES:
            raise RewardError(f"{name}: {present[name]} bytes, more than {REWARD_MAX_BYTES}")
        data = await sb.read_file(path, max_bytes=REWARD_MAX_BYTES)
        if data is None:  # listed a moment ago: a lost read, not a verifier that wrote nothing
            raise RewardError(f"{name} was listed ({present[name]} bytes) but reading it gave nothing")
        texts.append(data.decode("utf-8", errors="replace"))
    return texts[0], texts[1]
