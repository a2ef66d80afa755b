"""The verifier of a web task: reward 1 iff the app's database, as the agent left it, answers every check.

Run as a plain file by the grader's python3 (Python 3.7 or newer, standard library only) from a task's
tests/test.sh, never imported by OpenForge (`openforge.tasks.families.web` copies it into each web task):

    python3 -I check.py EXPECTED.json DATA_DIR REWARD_DIR

EXPECTED.json: {"checks": [{"sql": "SELECT ...", "rows": [[...], ...], "why": "what it checks"}, ...]}; a check
passes when the query's rows equal `rows` (in order). The database is read from a private copy of DATA_DIR (the
app's data, a `[verifier] state_paths` entry that grading copies from the agent's sandbox): a journal the
stopped server left is rolled back there, never in the state itself. Nothing the agent claims is read.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import tempfile

DB_NAME = "app.db"


def failures(expected_path: str, data: str) -> list[str]:
    with open(expected_path) as f:
        checks = json.load(f)["checks"]
    tmp = tempfile.mkdtemp(prefix="web-check-")
    try:
        for name in (DB_NAME, DB_NAME + "-journal", DB_NAME + "-wal"):
            src = os.path.join(data, name)
            if os.path.isfile(src) and not os.path.islink(src):
                shutil.copyfile(src, os.path.join(tmp, name))
        if not os.path.isfile(os.path.join(tmp, DB_NAME)):
            return [f"no database at {os.path.join(data, DB_NAME)}"]
        db = sqlite3.connect(os.path.join(tmp, DB_NAME))
        try:
            out = []
            for c in checks:
                rows = [list(r) for r in db.execute(c["sql"]).fetchall()]
                if rows != c["rows"]:
                    out.append("{}: {}".format(c.get("why", c["sql"]), difference(rows, c["rows"])))
            return out
        finally:
            db.close()
    except (OSError, sqlite3.Error, ValueError, KeyError) as e:
        return [f"the database could not be checked: {type(e).__name__}: {e}"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def difference(got: list[list[object]], want: list[list[object]]) -> str:
    """The first rows that differ (or the counts), short enough to read in the verifier's output."""
    if len(got) != len(want):
        return f"{len(got)} row(s), expected {len(want)}: got {shorten(got)}, expected {shorten(want)}"
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    return f"row {i + 1} is {shorten(got[i])}, expected {shorten(want[i])}"


def shorten(value: object, n: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= n else text[:n] + "..."


def main(argv: list[str]) -> int:
    expected, data, out = argv
    problems = failures(expected, data)
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("PASS")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "reward.txt"), "w") as f:
        f.write("0\n" if problems else "1\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
