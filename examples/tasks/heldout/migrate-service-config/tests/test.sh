#!/bin/bash
# Hidden verifier: copied to /tests only after the agent has finished.
# Writes 1 (pass) or 0 (fail) to /logs/verifier/reward.txt. APP_DIR / VERIFIER_DIR override the paths
# so the same script runs outside a container (openforge.tasks.local).
APP="${APP_DIR:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
mkdir -p "$OUT"
fail() { echo "FAIL: $*"; echo 0 > "$OUT/reward.txt"; exit 0; }
cd "$APP" || fail "no $APP"
[ ! -e legacy.ini ] || fail "legacy.ini is still there"
[ "$(sha256sum < legacy.ini.bak 2>/dev/null | cut -d' ' -f1)" = "6fa88d72c1c830662e2cd1739ef4286280f7b8a4c71418c6c54e7dcae3c0d821" ] \
  || fail "legacy.ini.bak is not the original legacy.ini"
python3 -I - <<'PY' || fail "config/service.json does not hold the migrated settings"
import json
want = {"listen": {"address": "0.0.0.0", "port": 8080, "workers": 4},
        "db": {"dsn": "postgres://db.internal/app", "pool_size": 10, "timeout_s": 30},
        "log": {"level": "DEBUG", "format": "json"}}
got = json.load(open("config/service.json"))
assert got == want and all(type(got[s][k]) is type(v) for s in want for k, v in want[s].items()), got
PY
[ "$(tr -d ' \n' < config/MIGRATED 2>/dev/null)" = "8" ] || fail "config/MIGRATED should hold 8"
echo PASS
echo 1 > "$OUT/reward.txt"
