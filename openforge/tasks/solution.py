"""A task's reference solution as one self-contained bash script: the one way OpenForge runs a solution.

Harbor copies the whole `solution/` directory into the environment and runs `solve.sh` from the working
directory, so a solution may read files beside it (`$(dirname "$0")/helper.py`). The oracle teacher can only
send text through a harness's shell tool, so here the directory travels inside the command: the script
recreates `solution/` in a fresh temporary directory (text files as here-documents, anything else as base64),
runs the solution script from there with the working directory unchanged, removes the directory and exits with
the script's status. `openforge tasks validate --run`, the no-container runner (`tasks.local`) and the oracle
all run this same text, so a task that validates is a task the oracle can demonstrate — and the
demonstration is a command a student model could write itself: files written, then run.

A solution that is one bash script with nothing beside it is sent as its own text, shebang line removed (the
short command the quickstart's tiny model learns from).

Line endings: a script checked out with CRLF endings cannot run on Linux (`$'\\r': command not found`), and
Harbor strips the carriage return ending each line of the scripts it uploads (`*.sh`, `*.py`; `sed
's/\\r$//'`). The same is done here; every other file is recreated byte for byte.
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from openforge.core.errors import TaskError

__all__ = ["MAX_COMMAND_BYTES", "SCRIPT_SUFFIXES", "SOLUTION_SCRIPTS", "SolutionError", "solution_script"]

#: A shell tool runs its command as one argument (`bash -c COMMAND`); Linux caps one argument at 128 KiB.
MAX_COMMAND_BYTES = 100_000
#: Files whose line-ending carriage returns are removed, as Harbor does when it uploads a solution.
SCRIPT_SUFFIXES = (".sh", ".py")
#: The scripts a task's solution/ may hold; running one leaves the others out (wrong.sh, look.sh and check.sh
#: are OpenForge's own extensions: a plausible wrong solution, never part of a demonstration; read-only
#: commands the oracle runs before its solution and after it).
SOLUTION_SCRIPTS = ("solve.sh", "wrong.sh", "look.sh", "check.sh")

_SHELLS = re.compile(r"^#!\s*(?:/usr)?/bin/(?:env\s+)?(?:ba)?sh(?:\s|$)")
_LINE_END_CR = re.compile(rb"\r(?=\n|\Z)")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SolutionError(TaskError, ValueError):
    """The solution cannot be turned into one command; the message names the file and the fix."""


@dataclass(frozen=True)
class _Entry:
    path: str  # relative, POSIX
    data: bytes = b""
    executable: bool = False
    link: str | None = None  # a symbolic link's target (recreated as a link, never followed)
    directory: bool = False


def solution_script(script: str | Path, env: Mapping[str, str] | None = None) -> str:
    """The bash text that runs `script` (e.g. `solution/solve.sh`) as Harbor would: with every file of its
    directory beside it, from the current working directory, `env` exported (task.toml `[solution] env`).

    Raises SolutionError (its message does not repeat the path) when the script is missing or empty, an `env`
    name is not a shell variable, or the command would be longer than a shell tool can take
    (MAX_COMMAND_BYTES)."""
    script = Path(script)
    if not script.is_file():
        raise SolutionError("no such file")
    exports = _exports(env or {})
    entries = _entries(script)
    own = _normalised(script.name, script.read_bytes())
    text = _as_text(own)
    if len(entries) == 1 and text is not None and _runs_with_bash(text):
        body = text.partition("\n")[2] if text.startswith("#!") else text
        body = body.strip()
        if not body:
            raise SolutionError("holds no command")
        command = "".join(exports) + body
    else:
        command = _directory_script(script.name, entries, exports, bash=text is not None and _runs_with_bash(text))
    size = len(command.encode())
    if size > MAX_COMMAND_BYTES:
        raise SolutionError(
            f"as one command, with the files beside it, the solution is {size} bytes: more than the "
            f"{MAX_COMMAND_BYTES} a shell tool's command can carry (Linux caps one argument at 128 KiB); make the "
            f"files beside {script.name} smaller (generate large data in the script instead)"
        )
    return command


def _exports(env: Mapping[str, str]) -> list[str]:
    lines = []
    for name, value in env.items():
        if not _VARIABLE.match(str(name)):
            raise SolutionError(
                f"task.toml [solution] env: {name!r} is not a shell variable name "
                "(letters, digits and _, not starting with a digit)"
            )
        lines.append(f"export {name}={shlex.quote(str(value))}\n")
    return lines


def _entries(script: Path) -> list[_Entry]:
    """Every file, link and directory of the script's directory (sorted), the other solution script left
    out, the script itself included."""
    root = script.parent
    skip = {name for name in SOLUTION_SCRIPTS if name != script.name}
    out: list[_Entry] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel in skip:
            continue
        if path.is_symlink():
            out.append(_Entry(rel, link=str(path.readlink())))
        elif path.is_dir():
            out.append(_Entry(rel, directory=True))
        elif path.is_file():
            executable = bool(path.stat().st_mode & 0o111) or rel == script.name
            out.append(_Entry(rel, _normalised(rel, path.read_bytes()), executable))
    return out


def _normalised(name: str, data: bytes) -> bytes:
    return _LINE_END_CR.sub(b"", data) if name.endswith(SCRIPT_SUFFIXES) else data


def _as_text(data: bytes) -> str | None:
    """The file as text a here-document reproduces exactly, or None (then it travels as base64)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\0" in text or "\r" in text:
        return None
    return text


def _runs_with_bash(text: str) -> bool:
    """Whether the script is a shell script (bash or sh shebang, or none) — run with bash as validate always
    has; any other interpreter is run through its own shebang line."""
    return not text.startswith("#!") or bool(_SHELLS.match(text))


def _directory_script(name: str, entries: list[_Entry], exports: list[str], *, bash: bool) -> str:
    def at(rel: str) -> str:
        quoted = shlex.quote(rel)
        return f'"$d/{rel}"' if quoted == rel else f'"$d"/{quoted}'

    lines = [
        f"# {name} with the files of its directory beside it, run from the working directory",
        "(",
        "d=$(mktemp -d) || exit 1",
    ]
    dirs = {str(PurePosixPath(e.path).parent) for e in entries if "/" in e.path} | {
        e.path for e in entries if e.directory
    }
    parents = sorted(p for p in dirs if not any(other.startswith(p + "/") for other in dirs))
    if parents:
        lines.append("mkdir -p " + " ".join(at(p) for p in parents))
    for entry in entries:
        if entry.directory:
            continue
        if entry.link is not None:
            lines.append(f"ln -s {shlex.quote(entry.link)} {at(entry.path)}")
            continue
        text = _as_text(entry.data)
        if text is not None and (text.endswith("\n") or not text):
            marker = _marker(text)
            lines.append(f"cat > {at(entry.path)} <<'{marker}'")
            lines.append(text + marker if text else marker)
        else:
            encoded = base64.encodebytes(entry.data).decode().rstrip("\n")
            lines.append(f"base64 -d > {at(entry.path)} <<'EOF'")
            lines.append(encoded + "\nEOF" if encoded else "EOF")
    executables = [at(e.path) for e in entries if e.executable and e.link is None and not e.directory]
    if executables:
        lines.append("chmod +x " + " ".join(executables))
    lines += [e.rstrip("\n") for e in exports]
    lines.append(f"bash {at(name)}" if bash else at(name))
    # `rm -r`, not `rm -rf`: Codex refuses any command holding `rm -f` ("rm -f style commands are not
    # permitted"), and without a terminal rm asks nothing
    lines += ["s=$?", 'rm -r "$d"', "exit $s", ")"]
    return "\n".join(lines) + "\n"


def _marker(text: str) -> str:
    """A here-document delimiter that is no line of `text`."""
    lines = set(text.split("\n"))
    marker, n = "EOF", 0
    while marker in lines:
        n += 1
        marker = f"EOF{n}"
    return marker
