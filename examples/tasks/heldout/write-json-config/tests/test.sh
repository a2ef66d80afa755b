#!/bin/bash
# Hidden verifier: copied to /tests only after the agent has finished.
# Writes 1 (pass) or 0 (fail) to /logs/verifier/reward.txt. APP_DIR / VERIFIER_DIR override the paths
# so the same script runs outside a container (openforge.tasks.local).
APP="${APP_DIR:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
mkdir -p "$OUT"
fail() { echo "FAIL: $*"; echo 0 > "$OUT/reward.txt"; exit 0; }
cd "$APP" || fail "no $APP"
# same FILE <<EOF ... EOF: FILE holds exactly the given lines (a missing final newline is tolerated)
same() { [ -f "$1" ] || fail "$1 is missing"; diff <(sed -e '$a\' "$1") - > /dev/null || fail "$1 does not have the expected content"; }
python3 -I -c "import json,sys; sys.exit(0 if json.load(open('config.json')) == {'port': 8080, 'debug': False} else 1)" \
  || fail "config.json is missing or does not hold {\"port\": 8080, \"debug\": false}"
echo PASS
echo 1 > "$OUT/reward.txt"
