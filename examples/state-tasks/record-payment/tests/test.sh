#!/bin/bash
# Hidden verifier: reads the ledger's data store (outside the work area: task.toml's state_paths) and writes 1
# (pass) or 0 (fail) to /logs/verifier/reward.txt. LEDGER_DIR / VERIFIER_DIR override the paths.
DATA="${LEDGER_DIR:-/var/lib/ledger}/ledger.json"
OUT="${VERIFIER_DIR:-/logs/verifier}"
mkdir -p "$OUT"
if python3 -I - "$DATA" <<'PY'
import json, sys

try:
    with open(sys.argv[1]) as f:
        payments = json.load(f)["payments"]
except (OSError, ValueError, KeyError, TypeError) as e:
    sys.exit(f"FAIL: no readable ledger: {e}")
want = [{"from": "alice", "amount": 42}, {"from": "bob", "amount": 17}]
if payments != want:
    sys.exit(f"FAIL: the ledger holds {payments!r}, expected {want!r}")
print("PASS")
PY
then
  echo 1 > "$OUT/reward.txt"
else
  echo 0 > "$OUT/reward.txt"
fi
