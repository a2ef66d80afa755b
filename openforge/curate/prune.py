"""Prune: what can be told without running anything.

- `schema`: a file missing or out of place, or `openforge.tasks` validation errors (each named);
- `leaks_tests`: the instruction names the verifier (`/tests`, `test.sh`, the reward file) or quotes one of
  its distinctive lines (the agent would be handed the check);
- `duplicate`: both the instruction, and the tests with the environment's files, are at least `threshold`
  similar (Jaccard overlap of word shingles, `openforge.core.similarity`) to those of an existing task or of
  a candidate that got here first. (Two parts, judged apart: tests share much boilerplate, so the instruction
  decides; and one instruction over two different environments makes two tasks.)
Tasks already solved by doing nothing need the environment: the test stage runs that check (`checks.py`).
"""

from __future__ import annotations

import re
from pathlib import Path

from openforge.core.similarity import ShingleIndex
from openforge.curate.files import problems
from openforge.tasks import validate_task_dir

VERIFIER_NAMES = ("/tests", "test.sh", "reward.txt", "reward.json", "/logs/verifier")
MIN_QUOTED = 24  # a test line at least this long, found verbatim in the instruction, is a leak
_BOILERPLATE = re.compile(r"^(#|set |mkdir |cd |exit|fi$|done$|then$|else$|echo (0|1|pass|fail))", re.IGNORECASE)


def task_text(files: dict[str, str]) -> tuple[str, str]:
    """What duplicates are judged on: the instruction; the tests and the environment's files."""
    rest = "\n".join(text for name, text in sorted(files.items()) if name.startswith(("tests/", "environment/")))
    return files.get("instruction.md", ""), rest


def schema_problems(files: dict[str, str], task_dir: Path) -> list[str]:
    found = problems(files)
    return found or validate_task_dir(task_dir)


def leaked_tests(files: dict[str, str]) -> str | None:
    """How the instruction gives the tests away, or None."""
    instruction = files.get("instruction.md", "")
    for name in VERIFIER_NAMES:
        if name in instruction:
            return f"the instruction names the verifier ({name!r})"
    for line in files.get("tests/test.sh", "").splitlines():
        line = line.strip()
        if len(line) >= MIN_QUOTED and not _BOILERPLATE.match(line) and line in instruction:
            return f"the instruction quotes the tests: {line!r}"
    return None


def duplicate_of(index: ShingleIndex, files: dict[str, str], threshold: float) -> tuple[str, float] | None:
    """(the task it duplicates, how similar) when at least `threshold` similar to one in `index`."""
    key, score = index.nearest(*task_text(files))
    return (key, score) if key is not None and score >= threshold else None
