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
same out/rollup.csv <<'EOF2'
category,units,revenue
displays,3,638.00
input,13,434.53
audio,3,267.00
cables,37,151.25
unknown,7,64.40
EOF2
[ "$(tr -d ' \n' < out/top_sku.txt 2>/dev/null)" = "MN-300" ] || fail "top_sku.txt should hold MN-300"
echo PASS
echo 1 > "$OUT/reward.txt"
