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
# the expected contents are written here, never read from data/: the agent can rewrite its inputs
for f in data/jan.csv backup/jan.csv; do
  [ ! -L "$f" ] || fail "$f is a link, not a file"
  same "$f" <<'EOF'
day,visits
1,10
2,12
EOF
done
for f in data/feb.csv backup/feb.csv; do
  [ ! -L "$f" ] || fail "$f is a link, not a file"
  same "$f" <<'EOF'
day,visits
1,8
EOF
done
[ "$(ls backup | wc -l)" -eq 2 ] || fail "backup/ should hold exactly the 2 csv files"
same data/readme.txt <<'EOF'
monthly visits
EOF
echo PASS
echo 1 > "$OUT/reward.txt"
