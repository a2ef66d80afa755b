"""Loading Harbor / Terminal-Bench 2.0 task directories.

    task-id/
      task.toml            timeouts, resources, metadata
      instruction.md       what the agent is told
      environment/         Dockerfile (+ files it copies); or [environment] docker_image
      tests/test.sh        the hidden verifier; writes /logs/verifier/reward.txt or reward.json
      solution/solve.sh    reference solution (optional); solution/wrong.sh (ours, optional)

A root may hold task directories at any depth; a ``train/`` or ``heldout/`` directory on the way down sets
the split of the tasks below it (``[metadata] split`` says the same from inside a task; they must agree).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from openforge.core.errors import TaskError
from openforge.tasks.context import BuildContextError, check_build_context
from openforge.tasks.gui_actions import ACTIONS_FILE, actions_path, load_actions
from openforge.tasks.model import Split, Task, TaskConfig, normalize_split
from openforge.tasks.solution import SOLUTION_SCRIPTS, SolutionError, solution_script

CONFIG_FILE = "task.toml"
INSTRUCTION_FILE = "instruction.md"
# a directory of one of these names holds tasks of that split
SPLIT_DIRS: dict[str, Split] = {"train": "train", "heldout": "heldout", "held-out": "heldout", "held_out": "heldout"}
_SKIP_DIRS = {"__pycache__", "node_modules", ".git"}


class TaskLoadError(TaskError, ValueError):
    """A task directory (or several) cannot be loaded; ``errors`` holds one line per problem."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


@dataclass
class DirReport:
    """What inspecting one task directory found."""

    path: Path
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    config: TaskConfig | None = None
    instruction: str | None = None

    @property
    def ok(self) -> bool:
        return not self.errors


def is_task_dir(path: Path) -> bool:
    return path.is_dir() and ((path / CONFIG_FILE).is_file() or (path / INSTRUCTION_FILE).is_file())


def describe_pydantic_errors(err: ValidationError, source: str) -> list[str]:
    """One line per invalid field, named by its dotted path: ``task.toml: environment.cpus = 'two': ...``."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].replace("Input should be", "must be").replace("Value error, ", "")
        if e["type"] == "missing":
            lines.append(f"{source}: {loc}: required, but missing")
        elif loc:
            lines.append(f"{source}: {loc} = {e.get('input')!r}: {msg}")
        else:
            lines.append(f"{source}: {msg}")
    return lines


def parse_task_toml(text: str, source: str = CONFIG_FILE) -> tuple[TaskConfig | None, list[str]]:
    """Parse and type-check ``task.toml`` text; returns (config or None, errors)."""
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return None, [f"{source}: not valid TOML: {e}"]
    try:
        return TaskConfig.model_validate(data), []
    except ValidationError as e:
        return None, describe_pydantic_errors(e, source)


def inspect_task_dir(path: str | Path, layout_split: Split | None = None) -> DirReport:
    """Check a task directory's layout and ``task.toml`` without running anything."""
    p = Path(path)
    rep = DirReport(path=p)
    if not p.exists():
        rep.errors.append(f"{p}: no such directory")
        return rep
    if not p.is_dir():
        rep.errors.append(f"{p}: not a directory")
        return rep

    # instruction.md
    ipath = p / INSTRUCTION_FILE
    if not ipath.is_file():
        rep.errors.append(f"{INSTRUCTION_FILE}: missing (the task's instruction for the agent)")
    else:
        try:
            text = ipath.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            rep.errors.append(f"{INSTRUCTION_FILE}: not UTF-8 text ({e.reason} at byte {e.start})")
        else:
            if not text.strip():
                rep.errors.append(f"{INSTRUCTION_FILE}: empty")
            rep.instruction = text

    # task.toml
    cpath = p / CONFIG_FILE
    if not cpath.is_file():
        rep.errors.append(f"{CONFIG_FILE}: missing (timeouts, resources and metadata; an empty file is allowed)")
    else:
        try:
            ctext = cpath.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            rep.errors.append(f"{CONFIG_FILE}: not UTF-8 text ({e.reason} at byte {e.start})")
        else:
            rep.config, errs = parse_task_toml(ctext, CONFIG_FILE)
            rep.errors.extend(errs)

    # environment
    env_dir = p / "environment"
    dockerfile = env_dir / "Dockerfile"
    image = rep.config.environment.docker_image if rep.config else None
    context_error = None
    if env_dir.exists() or env_dir.is_symlink():
        try:
            check_build_context(env_dir, within=p)
        except BuildContextError as e:
            context_error = str(e).replace(f"{env_dir}", "environment", 1)
            rep.errors.append(context_error)
    if context_error is not None:
        pass  # nothing of the context is read
    elif dockerfile.is_file():
        dtext = dockerfile.read_text(errors="replace")
        if not any(ln.strip().upper().startswith("FROM") for ln in dtext.splitlines()):
            rep.errors.append("environment/Dockerfile: has no FROM line")
    elif not image:
        if (env_dir / "docker-compose.yaml").is_file() or (env_dir / "docker-compose.yml").is_file():
            rep.errors.append(
                "environment/: only a docker-compose file; OpenForge needs environment/Dockerfile "
                "or [environment] docker_image"
            )
        else:
            rep.errors.append("environment/Dockerfile: missing, and task.toml sets no [environment] docker_image")

    # tests
    tests = p / "tests"
    if not tests.is_dir():
        rep.errors.append("tests/: missing (the hidden verifier; tests/test.sh is its entry point)")
    elif not (tests / "test.sh").is_file():
        rep.errors.append("tests/test.sh: missing (the verifier's entry point)")
    elif not os.access(tests / "test.sh", os.X_OK):
        rep.warnings.append("tests/test.sh: not executable (it is run with bash, so this is harmless)")

    # solution
    sol = p / "solution"
    if not (sol / "solve.sh").is_file():
        rep.warnings.append("solution/solve.sh: missing; the task cannot be validated by running it")
    if (sol / "wrong.sh").exists() and not (sol / "wrong.sh").is_file():
        rep.errors.append("solution/wrong.sh: not a file")
    for name in SOLUTION_SCRIPTS:  # each must become the one command the oracle sends and validate runs
        if (sol / name).is_file():
            try:
                solution_script(sol / name, rep.config.solution.env if rep.config is not None else None)
            except SolutionError as e:
                rep.errors.append(f"solution/{name}: {e}")

    # a GUI task: its app's state is what the verifier reads, and its demonstration is GUI steps
    cfg = rep.config
    if cfg is not None and cfg.environment.gui is not None:
        if not cfg.verifier.state_paths:
            rep.warnings.append(
                f"{CONFIG_FILE}: [environment.gui] without [verifier] state_paths: the verifier sees the image's "
                "initial app data, not what the agent did through the app; name the app's data directory there"
            )
        try:
            if load_actions(actions_path(p)) is None:
                rep.warnings.append("solution/actions.json: missing; the oracle has no GUI steps to demonstrate")
        except SolutionError as e:
            rep.errors.append(f"solution/{ACTIONS_FILE}: {e}")

    # split agreement
    if rep.config is not None and layout_split is not None:
        meta_split = rep.config.metadata.split
        if meta_split is not None and meta_split != layout_split:
            rep.errors.append(
                f"{CONFIG_FILE}: metadata.split = {meta_split!r} disagrees with the directory layout ({layout_split!r})"
            )
    return rep


def _layout_split_from_parts(parts: Iterable[str]) -> Split | None:
    found: Split | None = None
    for part in parts:
        if part.lower() in SPLIT_DIRS:
            found = SPLIT_DIRS[part.lower()]
    return found


def load_task(path: str | Path, layout_split: Split | None = None) -> Task:
    """Load one task directory; raises TaskLoadError naming every problem.

    ``layout_split`` is the split implied by where the directory sits; by default the name of its parent
    directory (``.../train/<task>`` or ``.../heldout/<task>``).
    """
    p = Path(path).resolve()
    if layout_split is None:
        layout_split = _layout_split_from_parts([p.parent.name])
    rep = inspect_task_dir(p, layout_split=layout_split)
    if rep.errors:
        raise TaskLoadError([f"{p}: {e}" if not e.startswith(str(p)) else e for e in rep.errors])
    assert rep.config is not None and rep.instruction is not None
    cfg = rep.config
    env_dir = p / "environment"
    dockerfile = env_dir / "Dockerfile"
    sol = p / "solution"
    return Task(
        id=cfg.metadata.id or p.name,
        path=p,
        instruction=rep.instruction,
        config=cfg,
        environment_dir=env_dir if env_dir.is_dir() else None,
        dockerfile=dockerfile if dockerfile.is_file() else None,
        image=cfg.environment.docker_image,
        tests_dir=p / "tests",
        solution_dir=sol if sol.is_dir() else None,
        solve_script=sol / "solve.sh" if (sol / "solve.sh").is_file() else None,
        wrong_script=sol / "wrong.sh" if (sol / "wrong.sh").is_file() else None,
        look_script=sol / "look.sh" if (sol / "look.sh").is_file() else None,
        check_script=sol / "check.sh" if (sol / "check.sh").is_file() else None,
        split=cfg.metadata.split or layout_split,
    )


def find_task_dirs(root: str | Path) -> list[tuple[Path, Split | None]]:
    """Task directories under ``root`` (or ``root`` itself), each with the split its layout implies."""
    r = Path(root).resolve()
    if is_task_dir(r):
        return [(r, _layout_split_from_parts([r.parent.name]))]
    found: list[tuple[Path, Split | None]] = []
    for dirpath, dirnames, _ in os.walk(r):
        d = Path(dirpath)
        if d != r and is_task_dir(d):
            found.append((d, _layout_split_from_parts([r.name, *d.relative_to(r).parts[:-1]])))
            dirnames[:] = []
            continue
        dirnames[:] = sorted(n for n in dirnames if not n.startswith(".") and n not in _SKIP_DIRS)
    return found


def inspect_tree(root: str | Path) -> list[DirReport]:
    """``inspect_task_dir`` for every task directory under ``root`` (or ``root`` itself), with the split its
    layout implies; for ``openforge tasks validate DIR``. A root without tasks gives one report with an error."""
    r = Path(root)
    if not r.is_dir():
        return [DirReport(path=r, errors=[f"{r}: no such directory"])]
    dirs = find_task_dirs(r)
    if not dirs:
        return [DirReport(path=r, errors=[f"{r}: holds no task directory (one with task.toml and instruction.md)"])]
    return [inspect_task_dir(d, layout_split=layout) for d, layout in dirs]


def load_tasks(
    root_or_dirs: str | Path | Iterable[str | Path],
    split: str | None = None,
) -> list[Task]:
    """Every task under one root or several paths (each a root or a task directory), sorted by id.

    ``split`` ("train" / "heldout") keeps only that split. Raises TaskLoadError listing every invalid task
    directory, a path that holds no task, or two tasks with the same id.
    """
    paths = [root_or_dirs] if isinstance(root_or_dirs, (str, Path)) else list(root_or_dirs)
    want = normalize_split(split) if split else None
    if want is not None and want not in ("train", "heldout"):
        raise TaskLoadError([f"unknown split {split!r}: expected 'train' or 'heldout'"])
    errors: list[str] = []
    tasks: list[Task] = []
    for root in paths:
        rp = Path(root)
        if not rp.is_dir():
            errors.append(f"{rp}: no such directory")
            continue
        dirs = find_task_dirs(rp)
        if not dirs:
            errors.append(f"{rp}: holds no task directory (one with task.toml and instruction.md)")
        for d, layout in dirs:
            try:
                tasks.append(load_task(d, layout_split=layout))
            except TaskLoadError as e:
                errors.extend(e.errors)
    seen: dict[str, Path] = {}
    for t in tasks:
        if t.id in seen and seen[t.id] != t.path:
            errors.append(f"duplicate task id {t.id!r}: {seen[t.id]} and {t.path}")
        seen.setdefault(t.id, t.path)
    if errors:
        raise TaskLoadError(errors)
    uniq = {t.path: t for t in tasks}.values()
    out = sorted(uniq, key=lambda t: (t.id, str(t.path)))
    if want is not None:
        out = [t for t in out if t.split == want]
    return out
