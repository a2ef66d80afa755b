#!/bin/bash
# Hidden verifier: runs the hidden unit tests in this directory against the code in the workdir and
# writes {"reward": 1.0 or 0.0, ...} to /logs/verifier/reward.json (numbers only, as Harbor requires).
APP="${APP_DIR:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
TESTS="${TESTS_DIR:-$(cd "$(dirname "$0")" && pwd)}"
mkdir -p "$OUT"
cd "$APP" || { echo '{"reward": 0.0, "workdir_found": 0}' > "$OUT/reward.json"; exit 0; }
if PYTHONPATH="$APP" PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s "$TESTS" -p 'test_*.py' -v; then
  echo '{"reward": 1.0, "tests_passed": 1}' > "$OUT/reward.json"
else
  echo '{"reward": 0.0, "tests_passed": 0}' > "$OUT/reward.json"
fi
