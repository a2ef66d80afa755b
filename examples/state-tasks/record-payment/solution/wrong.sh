#!/bin/bash
# Plausible but wrong: writes a ledger file into the work area instead of using the tool.
printf '{"payments": [{"from": "alice", "amount": 42}, {"from": "bob", "amount": 17}]}\n' > ledger.json
