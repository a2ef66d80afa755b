"""A tiny ledger: payments kept in $LEDGER_DIR/ledger.json (default /var/lib/ledger)."""

import json
import os
import sys
import tempfile

DATA_DIR = os.environ.get("LEDGER_DIR", "/var/lib/ledger")
DATA = os.path.join(DATA_DIR, "ledger.json")


def load():
    if not os.path.exists(DATA):
        return {"payments": []}
    with open(DATA) as f:
        return json.load(f)


def save(ledger):
    fd, tmp = tempfile.mkstemp(dir=DATA_DIR, prefix=".ledger-")
    with os.fdopen(fd, "w") as f:
        json.dump(ledger, f, indent=1)
    os.chmod(tmp, 0o644)
    os.replace(tmp, DATA)


def main(argv):
    if argv[:1] == ["add"] and len(argv) == 3 and argv[2].isdigit():
        ledger = load()
        ledger["payments"].append({"from": argv[1], "amount": int(argv[2])})
        save(ledger)
    elif argv == ["list"]:
        for p in load()["payments"]:
            print(f"{p['from']}\t{p['amount']}")
    else:
        sys.exit("usage: ledger.py add NAME AMOUNT | ledger.py list")


if __name__ == "__main__":
    main(sys.argv[1:])
