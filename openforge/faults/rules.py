"""When an armed fault strikes: the one decision, made before each of the agent's shell commands.

Standard library only: the same file runs in this process (the in-process react episodes, through
`openforge.faults.local`) and inside a sandbox as `decide.py`, called by the shell hook (`hook.py`) before
each command the harness's shell runs. It reads the episode's fault state (a JSON file), decides, and writes
the state back: which faults fired, at which of the agent's commands, how many seconds into the episode.

A transient failure strikes the agent's first command that changes something (a write, a delete, ...): the
command does not run and says why; run again, it works. A hang strikes the first command of any kind.

Verdicts: `run` (let the command run), `fail CODE` + a message for stderr (the command does not run),
`hang SECONDS` (sleep, so the harness's own command timeout fires), `skip` (a command line the harness runs for
itself: not the agent's, not counted). A fault that changes the environment itself (missing_dir, permission,
disk_full) was set up before the harness started; here it is noted as fired when a command meets it.

    python3 decide.py STATE_DIR COMMAND_LINE      # prints "ACTION[ ARG]" then the message

The types are for the checker only (`TYPE_CHECKING`): the sandbox's python3 may be old (3.7 at least).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TypedDict

    class FaultEntry(TypedDict, total=False):
        """One armed fault in the state file (`FaultRecord` in openforge.faults.plan, as JSON)."""

        kind: str
        applicable: bool
        reason: str | None
        target: str | None
        seconds: float | None
        fired: bool
        command: int | None
        at_s: float | None
        times: int

    class FaultState(TypedDict, total=False):
        """The episode's fault state (`FaultPlan.state`): what `decide` reads and updates."""

        root: str
        views: list[str]
        started: float
        commands: int
        internal: list[str]
        command_pattern: str | None
        faults: list[FaultEntry]

    # (action, argument, message): `run`/`fail`/`hang`/`skip`, the exit code or seconds, the stderr message
    Verdict = tuple[str, str, str]

STATE_FILE = "state.json"

MESSAGES = {
    "transient": "bash: fork: Resource temporarily unavailable",
    "hang": "[the command hung and was stopped after {seconds:g} s]",
    "permission": "bash: {target}: Permission denied",
    "disk_full": "bash: {target}: No space left on device",
    "flaky_service": "{target}: error: failed to connect to the service: Connection refused",
}
EXIT_CODES = {"transient": 1, "permission": 1, "disk_full": 1, "flaky_service": 7}
# checked in this order; the first verdict that stops the command wins
ORDER = ("hang", "transient", "flaky_service", "permission", "disk_full", "missing_dir")

_SPLIT = re.compile(r"&&|\|\||[;|\n()]")
_REDIRECT = re.compile(r"(?:\d?>>?\|?|&>>?)\s*(['\"]?)([^\s'\";|&<>()]+)\1")


def _parts(command: str) -> list[list[str]]:
    """The simple commands of a command line, as word lists (coarse: quotes kept within a part)."""
    out = []
    for part in _SPLIT.split(command):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in ("sudo", "env", "command")):
            words = words[1:]
        words = _without_redirections(words)
        if words:
            out.append(words)
    return out


def _without_redirections(words: list[str]) -> list[str]:
    """Words without redirections (`> f`, `2>&1`, `<f`): they are not a program's arguments."""
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        m = re.match(r"^(\d*|&)(>>?\|?|<)(.*)$", w)
        if m:
            skip = not m.group(3)
            continue
        out.append(w)
    return out


def _normal(path: str, roots: Sequence[str]) -> str | None:
    """A path relative to the work directory, without ./ (`roots`: the absolute paths the work directory has
    for the agent); None outside it (or not a file path)."""
    if not path or path.startswith("&") or path.startswith("/dev/"):
        return None
    if path.startswith("/"):
        inside = [r.rstrip("/") for r in roots if path == r.rstrip("/") or path.startswith(r.rstrip("/") + "/")]
        if not inside:
            return None
        path = path[len(inside[0]) :].lstrip("/")
    while path.startswith("./"):
        path = path[2:]
    return path or "."


def written_paths(command: str, roots: Sequence[str]) -> list[str]:
    """Paths in the work directory that the command line writes (redirections, and the arguments of programs
    that write files), relative to it; `roots`: the work directory's absolute paths as the agent sees it."""
    paths = [_normal(m.group(2), roots) for m in _REDIRECT.finditer(command)]
    for words in _parts(command):
        program = words[0].rsplit("/", 1)[-1]
        args = [w for w in words[1:] if not w.startswith("-")]
        if program == "sed" and any(w.startswith("-i") for w in words[1:]):
            paths += [_normal(a, roots) for a in args[1:]]
        elif program in ("cp", "mv", "install", "ln") and args:
            paths.append(_normal(args[-1], roots))
        elif program in ("tee", "touch", "truncate", "mkdir"):
            paths += [_normal(a, roots) for a in args]
        elif program == "dd":
            paths += [_normal(w[3:], roots) for w in words[1:] if w.startswith("of=")]
    return [p for p in paths if p]


# programs that change something whatever their arguments (besides those `written_paths` follows)
CHANGERS = frozenset(
    {
        "rm",
        "rmdir",
        "chmod",
        "chown",
        "tar",
        "unzip",
        "git",
        "pip",
        "pip3",
        "apt",
        "apt-get",
        "npm",
        "make",
        "patch",
        "gzip",
        "gunzip",
    }
)


def changes_something(command: str, roots: Sequence[str]) -> bool:
    """Whether the command line writes a file anywhere (not /dev/...) or runs a program that changes state."""
    if any(not m.group(2).startswith(("&", "/dev/")) for m in _REDIRECT.finditer(command)):
        return True
    if written_paths(command, roots):
        return True
    return any(words[0].rsplit("/", 1)[-1] in CHANGERS for words in _parts(command))


def _under(path: str, target: str) -> bool:
    return path == target or path.startswith(target.rstrip("/") + "/")


def mentions(command: str, target: str) -> bool:
    """Whether the command line names `target` (a path relative to the work directory) or a path under it."""
    pattern = r"(?<![\w.-])(?:\./)?" + re.escape(target.rstrip("/")) + r"(?![\w.-])"
    return re.search(pattern, command) is not None


INTERPRETERS = ("sh", "bash", "python", "python3", "node")


def calls_program(command: str, program: str) -> bool:
    """Whether the command line runs `program` (by name or path, or as the script an interpreter runs)."""
    for words in _parts(command):
        names = [words[0]] + (words[1:2] if words[0].rsplit("/", 1)[-1] in INTERPRETERS else [])
        if any(w.rsplit("/", 1)[-1] == program for w in names):
            return True
    return False


def fixes(command: str, programs: Sequence[str], target: str, roots: Sequence[str]) -> bool:
    """Whether the command line runs one of `programs` on `target` or a path above it (a `chmod` of the
    read-only file, an `rm` of the ballast): it runs, and the real file system decides from there."""
    for words in _parts(command):
        if words[0].rsplit("/", 1)[-1] in programs:
            paths = [_normal(w, roots) for w in words[1:] if not w.startswith("-")]
            if any(p and (_under(target, p) or p == ".") for p in paths):
                return True
    return False


def agent_command(line: str, state: FaultState) -> str | None:
    """The agent's own command within the line the shell runs (some harnesses wrap it), or None when the
    line is one the harness runs for itself."""
    for pattern in state.get("internal") or []:
        if re.search(pattern, line):
            return None
    wrapper = state.get("command_pattern")
    if wrapper:
        m = re.search(wrapper, line, re.S)
        if m:
            return m.group("cmd").replace("'\\''", "'")
    return line


def decide(state: FaultState, line: str, now: float | None = None) -> Verdict:
    """(action, argument, message) for the command line `line`; `state` is updated in place."""
    command = agent_command(line, state)
    if command is None:
        return "skip", "", ""
    now = time.time() if now is None else now
    state["commands"] = state.get("commands", 0) + 1
    n = state["commands"]
    root = state.get("root") or "."
    roots = [root] + list(state.get("views") or [])
    verdict: Verdict = ("run", "", "")
    faults = sorted(
        (f for f in state.get("faults", []) if f.get("applicable")),
        key=lambda f: ORDER.index(f["kind"]) if f["kind"] in ORDER else len(ORDER),
    )
    for fault in faults:
        hit = _strikes(fault, command, root, roots)
        if hit is None:
            continue
        if not fault.get("fired"):
            fault["fired"], fault["command"] = True, n
            fault["at_s"] = round(now - state.get("started", now), 3)
        fault["times"] = fault.get("times", 0) + 1
        if hit[0] != "run" and verdict[0] == "run":
            verdict = hit
    return verdict


def _strikes(fault: FaultEntry, command: str, root: str, roots: Sequence[str]) -> Verdict | None:
    """None when the fault does not meet this command; else the verdict it gives."""
    kind, target = fault["kind"], fault.get("target")
    if kind in ("transient", "hang"):
        if fault.get("fired") or (kind == "transient" and not changes_something(command, roots)):
            return None
        if kind == "hang":
            given = fault.get("seconds")
            seconds = float(3600 if given is None else given)
            return "hang", f"{seconds:g}", MESSAGES["hang"].format(seconds=seconds)
        return "fail", str(EXIT_CODES[kind]), MESSAGES[kind]
    if kind == "flaky_service":
        if fault.get("fired") or not target or not calls_program(command, target):
            return None
        return "fail", str(EXIT_CODES[kind]), MESSAGES[kind].format(target=target)
    if not target:  # the environment faults below act on a path (FaultPlan always gives them one)
        return None
    if kind == "permission":
        path = os.path.join(root, target)
        try:
            writable = os.stat(path).st_mode & 0o222
        except OSError:
            return None
        hits = [p for p in written_paths(command, roots) if _under(p, target)]
        if writable or not hits or fixes(command, ("chmod", "chown", "rm", "mv", "cp", "install"), target, roots):
            return None
        return "fail", str(EXIT_CODES[kind]), MESSAGES[kind].format(target=hits[0])
    if kind == "disk_full":
        if not os.path.lexists(os.path.join(root, target)):
            return None  # the ballast is gone: space is free again
        hits = written_paths(command, roots)
        if not hits or fixes(command, ("rm", "truncate", "mv", "unlink"), target, roots):
            return None
        return "fail", str(EXIT_CODES[kind]), MESSAGES[kind].format(target=hits[0])
    if kind == "missing_dir":
        if os.path.isdir(os.path.join(root, target)) or not mentions(command, target):
            return None
        return "run", "", ""  # the shell itself reports the missing directory
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: decide.py STATE_DIR COMMAND_LINE", file=sys.stderr)
        return 2
    path = os.path.join(argv[1], STATE_FILE)
    with open(path, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        state = json.load(f)
        action, arg, message = decide(state, argv[2])
        f.seek(0)
        f.truncate()
        json.dump(state, f)
    print((action + " " + arg).strip())
    print(message)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
