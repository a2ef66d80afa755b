#!/bin/bash
# Reference solution; runs in the workdir (/app).
python3 ledger.py add alice 42 && python3 ledger.py add bob 17
