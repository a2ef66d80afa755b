#!/bin/bash
# Hidden verifier of a web task: reward 1 iff the app's database (copied from the agent's sandbox: [verifier]
# state_paths) answers every check of expected.json (check.py); nothing the agent says is read.
TESTS="$(cd "$(dirname "$0")" && pwd)"
OUT="${VERIFIER_DIR:-/logs/verifier}"
python3 -I "$TESTS/check.py" "$TESTS/expected.json" "${WEBAPP_DATA:-/var/lib/webapp}" "$OUT" \
  || { mkdir -p "$OUT" && echo 0 > "$OUT/reward.txt"; }
