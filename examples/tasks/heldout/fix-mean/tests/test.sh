#!/bin/bash
# Hidden verifier: calls the function under test on hidden inputs (cases.json) and writes
# {"reward": 1.0 or 0.0, ...} to /logs/verifier/reward.json (numbers only, as Harbor requires). The agent's code
# runs in a child process of check.py, never trusted with the verdict, never imported by a test framework
# (`python3 -I`, from the tests' directory, the module loaded by its path): see check.py.
APP="${APP_DIR:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
TESTS="${TESTS_DIR:-$(cd "$(dirname "$0")" && pwd)}"
cd "$TESTS" || exit 1
exec python3 -I -B "$TESTS/check.py" "$APP" "$OUT"
