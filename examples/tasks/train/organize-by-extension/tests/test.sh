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
[ -d inbox ] || fail "inbox/ was removed"
[ -z "$(ls -A inbox)" ] || fail "inbox/ is not empty"
# each file moved unchanged: its content is written here, never read from what the agent could rewrite
while read -r f content; do
  [ -f "sorted/$f" ] && [ ! -L "sorted/$f" ] || fail "sorted/$f is missing"
  printf '%s\n' "$content" | cmp -s - "sorted/$f" || fail "sorted/$f was changed"
done <<'EOF'
pdf/report.pdf %PDF-fake
jpg/photo.jpg jpeg
jpg/pic.jpg jpeg2
txt/notes.txt remember
txt/todo.txt - x
csv/data.csv a,b
EOF
same sorted/manifest.txt <<'EOF'
csv/data.csv
jpg/photo.jpg
jpg/pic.jpg
pdf/report.pdf
txt/notes.txt
txt/todo.txt
EOF
echo PASS
echo 1 > "$OUT/reward.txt"
