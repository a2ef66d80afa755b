"""Compare a work directory's files with an expected state (standard library only).

The same source is written next to generated tasks' ``tests/test.sh`` as ``check_state.py``, so the in-memory
check of a family instance and the verifier inside a sandbox agree exactly.

Rules: every regular file under the directory counts, except paths with a component starting with ``.`` and
``__pycache__`` directories; contents are compared after removing trailing newlines (``printf 'x'`` and
``echo x`` are equivalent); empty directories do not count.

    python3 check_state.py APP_DIR EXPECTED_JSON VERIFIER_DIR   # writes VERIFIER_DIR/reward.txt (1 or 0)

The annotations are for the checker only: the sandbox's python3 may be old (3.7 at least).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping


def _ignored(rel: str) -> bool:
    return any(part.startswith(".") or part == "__pycache__" for part in rel.split("/"))


def normalize(content: str | bytes) -> str:
    if isinstance(content, bytes):
        content = content.decode("utf-8", errors="replace")
    return content.rstrip("\n")


def read_state(root: str) -> dict[str, str]:
    """{relative/path: text} of every counted file under root."""
    state: dict[str, str] = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if _ignored(rel) or os.path.islink(full) or not os.path.isfile(full):
                continue
            with open(full, "rb") as f:
                state[rel] = f.read().decode("utf-8", errors="replace")
    return state


def compare_states(actual: Mapping[str, str | bytes], expected: Mapping[str, str | bytes]) -> list[str]:
    """Differences between two {path: content} states, as readable lines; empty when they are equal."""
    problems = []
    act = {k: normalize(v) for k, v in actual.items() if not _ignored(k)}
    exp = {k: normalize(v) for k, v in expected.items() if not _ignored(k)}
    for path in sorted(set(exp) - set(act)):
        problems.append("missing file: " + path)
    for path in sorted(set(act) - set(exp)):
        problems.append("unexpected file: " + path)
    for path in sorted(set(act) & set(exp)):
        if act[path] != exp[path]:
            problems.append(f"wrong content: {path}: expected {exp[path][:200]!r}, found {act[path][:200]!r}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: check_state.py APP_DIR EXPECTED_JSON VERIFIER_DIR", file=sys.stderr)
        return 2
    app, expected_path, out = argv[1], argv[2], argv[3]
    with open(expected_path) as f:
        expected = json.load(f)
    problems = compare_states(read_state(app), expected) if os.path.isdir(app) else ["no directory " + app]
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("PASS")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "reward.txt"), "w") as f:
        f.write("0\n" if problems else "1\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
