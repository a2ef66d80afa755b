"""Validating a task directory's schema (``validate_task_dir``). Validating by running the solutions in a
sandbox is the rollout room's: ``openforge.rollout.validate.validate_task_by_running``."""

from __future__ import annotations

from pathlib import Path

from openforge.tasks.loader import inspect_task_dir


def validate_task_dir(path: str | Path, warnings: list[str] | None = None) -> list[str]:
    """Every schema problem of a task directory, one line each, naming the file and field; [] when valid.

    Pass a list as ``warnings`` to also collect non-fatal remarks (test.sh not executable, no solve.sh, ...).
    """
    rep = inspect_task_dir(path)
    if warnings is not None:
        warnings.extend(rep.warnings)
    return rep.errors
