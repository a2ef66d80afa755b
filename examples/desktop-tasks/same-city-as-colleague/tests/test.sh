#!/bin/bash
# Hidden verifier of a desktop task: reward 1 iff the app's database (copied from the agent's sandbox: [verifier]
# state_paths) answers every check of expected.json (check.py); nothing the agent says is read.
TESTS="$(cd "$(dirname "$0")" && pwd)"
OUT="${VERIFIER_DIR:-/logs/verifier}"
python3 -I "$TESTS/check.py" "$TESTS/expected.json" "${DESKAPP_DATA:-/var/lib/deskapp}" "$OUT" \
  || { mkdir -p "$OUT" && echo 0 > "$OUT/reward.txt"; }
