"""A candidate's files: what a generator may write, and writing them as a Harbor task directory.

A generator is not trusted with the file system: each path must be relative, inside the task's own layout
(`task.toml`, `instruction.md`, `environment/`, `tests/`, `solution/`), without `..`, and of bounded size.
`[metadata] id` and `split` are taken out of `task.toml` — the pipeline names the task (its candidate id) and
its split (the layout of the output) — and shell scripts are made executable.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path, PurePosixPath

TASK_FILES = (
    "task.toml",
    "instruction.md",
    "environment/Dockerfile",
    "tests/test.sh",
    "solution/solve.sh",
    "solution/wrong.sh",
)
ROOTS = ("environment", "tests", "solution")
MAX_FILES = 64
MAX_BYTES = 256 * 1024

_TABLE = re.compile(r"^\s*\[([^\]]+)\]\s*$")
_OWN_KEY = re.compile(r"^\s*(id|split)\s*=")


def problems(files: dict[str, str]) -> list[str]:
    """What is wrong with a generator's files ([] when they can be written)."""
    out = [f"{name}: missing" for name in TASK_FILES if name not in files]
    if len(files) > MAX_FILES:
        out.append(f"{len(files)} files: at most {MAX_FILES}")
    for name, text in files.items():
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            out.append(f"{name}: not a path inside the task")
        elif name not in TASK_FILES[:2] and path.parts[0] not in ROOTS:
            out.append(f"{name}: outside the task layout (task.toml, instruction.md, {', '.join(ROOTS)}/)")
        if not isinstance(text, str):
            out.append(f"{name}: not text")
        elif len(text.encode()) > MAX_BYTES:
            out.append(f"{name}: {len(text.encode())} bytes, at most {MAX_BYTES}")
    return out


def without_own_keys(toml_text: str) -> str:
    """`task.toml` without `[metadata] id` / `split` (the pipeline decides both)."""
    lines, table = [], None
    for line in toml_text.splitlines():
        match = _TABLE.match(line)
        if match:
            table = match.group(1).strip()
        elif table == "metadata" and _OWN_KEY.match(line):
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def write_task_dir(task_dir: Path, files: dict[str, str]) -> None:
    """The files as a task directory (replacing what was there). Call `problems` first."""
    if task_dir.exists():
        shutil.rmtree(task_dir)
    for name, text in files.items():
        path = task_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(without_own_keys(text) if name == "task.toml" else text)
        if name.endswith(".sh"):
            path.chmod(0o755)


def read_task_files(task_dir: Path) -> dict[str, str]:
    """A task directory's text files, by relative path (what a generator is shown of a seed or a candidate)."""
    out = {}
    for path in sorted(p for p in task_dir.rglob("*") if p.is_file()):
        try:
            out[path.relative_to(task_dir).as_posix()] = path.read_text()
        except UnicodeDecodeError:
            continue
    return out
