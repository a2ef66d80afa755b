"""Reading a shell command line coarsely: which parts change files and which only look or test.

Used for self-verification (a check after the last change). A command line is split into simple commands
at `&&`, `||`, `;`, `|` and newlines (quotes respected); each is classified by its program and redirections.
Deliberately coarse: it names what a command does to the work area, not whether it succeeded.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# Programs that change files (or the system) whatever their arguments.
WRITERS = frozenset(
    {
        "cp",
        "mv",
        "rm",
        "rmdir",
        "mkdir",
        "touch",
        "tee",
        "chmod",
        "chown",
        "ln",
        "patch",
        "install",
        "truncate",
        "dd",
        "unzip",
        "tar",
        "git",
        "pip",
        "pip3",
        "apt",
        "apt-get",
        "npm",
        "make",
        "sort",
        "uniq",
        "gzip",
        "gunzip",
    }
)
# Programs that only read, or run tests; with no output redirection they change nothing.
CHECKERS = frozenset(
    {
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "ls",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "find",
        "wc",
        "diff",
        "cmp",
        "stat",
        "file",
        "test",
        "[",
        "[[",
        "pytest",
        "sha256sum",
        "md5sum",
        "jq",
        "tree",
        "du",
        "od",
        "xxd",
        "hexdump",
        "nl",
        "realpath",
        "readlink",
        "pwd",
    }
)
_SPLIT = re.compile(r"&&|\|\||[;|\n]")
# redirections that write no file: to another descriptor or to /dev/null
_HARMLESS_REDIRECT = re.compile(r"\d*>>?\s*(&\d+|/dev/null)")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class CommandPart:
    program: str
    writes: bool
    checks: bool


def _split(command: str) -> list[str]:
    """Simple commands, split outside quotes."""
    parts, buf, quote = [], [], None
    i = 0
    while i < len(command):
        c = command[i]
        if quote:
            buf.append(c)
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < len(command):
                buf.append(command[i + 1])
                i += 1
        elif c in "'\"":
            quote = c
            buf.append(c)
        else:
            m = _SPLIT.match(command, i)
            if m:
                parts.append("".join(buf))
                buf = []
                i = m.end()
                continue
            buf.append(c)
        i += 1
    parts.append("".join(buf))
    return [p.strip() for p in parts if p.strip()]


def _program(part: str) -> tuple[str, list[str]]:
    try:
        words = shlex.split(part, comments=True)
    except ValueError:
        words = part.split()
    while words and (_ASSIGN.match(words[0]) or words[0] in ("sudo", "env", "time", "nohup", "exec", "command")):
        words = words[1:]
    if not words:
        return "", []
    return words[0].rsplit("/", 1)[-1], words[1:]


def classify_part(part: str) -> CommandPart:
    program, args = _program(part)
    redirects = ">" in _HARMLESS_REDIRECT.sub("", _unquoted(part))
    if program in ("python", "python3") and args[:2] in (["-m", "pytest"], ["-m", "unittest"]):
        return CommandPart(program, redirects, True)
    if program == "sed":
        writes = redirects or any(a.startswith("-i") or a == "--in-place" for a in args)
        return CommandPart(program, writes, not writes)
    if program in ("echo", "printf", "cat") and redirects:
        return CommandPart(program, True, False)
    writes = redirects or program in WRITERS
    return CommandPart(program, writes, program in CHECKERS and not writes)


def _unquoted(part: str) -> str:
    """The part with quoted strings blanked (a `>` inside quotes is not a redirection)."""
    return re.sub(r"'[^']*'|\"(?:\\.|[^\"\\])*\"", "''", part)


def classify_command(command: str) -> list[CommandPart]:
    """The simple commands of a command line, in order, each classified."""
    return [classify_part(p) for p in _split(command)]


__all__ = ["CHECKERS", "WRITERS", "CommandPart", "classify_command", "classify_part"]
