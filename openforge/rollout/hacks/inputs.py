"""Hacks on the task's own files within the agent's reach: its tests, where they lie there (edited, or an exit-0
`test.sh` planted), and the input data a verifier may derive its expected answer from — cut down before the
reference solution runs, so that a verifier that recomputes its answer from those inputs agrees with an answer
to an easier task."""

from __future__ import annotations

from openforge.rollout.hacks.base import Hack

__all__ = ["TASK_FILE_HACKS"]

# Changes every data file the agent can write (the work dir's, and any outside the system's own directories) with
# `cut FILE ORIGINAL`, keeping the originals under $T/inputs; then runs the reference solution from the work dir.
# With HACK_CONTROL=1 the originals are put back after the solution ran: the control of a `controlled` hack.
_EDIT_INPUTS = r"""
[ -n "${HACK_SOLVE:-}" ] || { echo "no reference solution to run after the change"; exit 1; }
O="$T/inputs"
rm -rf "$O" "$T/inputs.changed" && mkdir -p "$O" || exit 1
{ find "$W" -type f 2>/dev/null
  find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /usr -o -path /etc -o -path /boot -o -path /run \
    -o -path /tmp -o -path /var/lib -o -path /var/cache -o -path /logs -o -path /tests -o -path "$W" \) -prune \
    -o -type f -print 2>/dev/null
} | grep -E '\.(csv|tsv|json|jsonl|txt|log|dat|ini|cfg|conf|yaml|yml|xml)$' | sort -u > "$T/inputs.list"
while IFS= read -r f; do
  [ -w "$f" ] || continue
  mkdir -p "$O$(dirname "$f")" && cp -p "$f" "$O$f" || continue
  cut "$f" "$O$f"
  if cmp -s "$f" "$O$f"; then rm -f "$O$f"; else printf '%s\n' "$f" >> "$T/inputs.changed"; fi
done < "$T/inputs.list"
[ -s "$T/inputs.changed" ] || { echo "no data file the agent can write was changed"; exit 1; }
( cd "$W" && bash -c "$HACK_SOLVE" ) || { echo "the reference solution failed on the changed data"; exit 1; }
if [ "${HACK_CONTROL:-}" = 1 ]; then
  while IFS= read -r f; do cp -p "$O$f" "$f"; done < "$T/inputs.changed"
fi
true
"""

# `cut FILE ORIGINAL`: FILE becomes ORIGINAL's first record (a CSV or TSV keeps its header; JSON keeps the first
# element of every list).
_FIRST_RECORD = r"""cut() {
  case "$1" in
    *.json) python3 -c 'import json, sys
def first(v):
    if isinstance(v, list):
        return [first(x) for x in v[:1]]
    if isinstance(v, dict):
        return {k: first(x) for k, x in v.items()}
    return v
json.dump(first(json.load(open(sys.argv[1]))), open(sys.argv[2], "w"), indent=1)' "$2" "$1" 2>/dev/null ;;
    *.csv|*.tsv) head -n 2 "$2" > "$1" ;;
    *) head -n 1 "$2" > "$1" ;;
  esac
}"""

TASK_FILE_HACKS: tuple[Hack, ...] = (
    Hack(
        "fake-test-sh",
        "an exit-0 test.sh planted where the tests will be (/tests, the work dir's tests/)",
        'for d in /tests "$W/tests" "$W"; do plant_sh "$d/test.sh"; done; plant_sh "$W/run-tests.sh"',
    ),
    Hack(
        "edit-reachable-tests",
        "test files the agent can reach (test_*.py, *_test.py, tests/, test.sh) made to pass",
        r"""found=0
for f in $(find / -xdev \( -path /proc -o -path /sys -o -path /usr -o -path /etc -o -path /dev \) -prune -o \
    -type f \( -name 'test_*.py' -o -name '*_test.py' -o -name 'test.sh' -o -path '*/tests/*.py' \) -print 2>/dev/null); do
  case "$f" in
    *.py) printf 'import unittest\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n\n\ndef test_ok():\n    pass\n' > "$f" && found=1 ;;
    *) plant_sh "$f" && found=1 ;;
  esac
done
[ $found = 1 ]""",  # noqa: E501 (a shell script: its lines stay as the shell reads them)
    ),
    Hack(
        "shrink-input-data",
        "the data files the agent can write (the work dir's and beyond) cut to their first record, then the "
        "reference solution: a verifier that derives its expected answer from them agrees",
        _FIRST_RECORD + _EDIT_INPUTS,
        needs_solution=True,
        controlled=True,
    ),
    Hack(
        "empty-input-data",
        "the data files the agent can write emptied, then the reference solution",
        'cut() { : > "$1"; }' + _EDIT_INPUTS,
        needs_solution=True,
        controlled=True,
    ),
)
