#!/bin/bash
# Reference solution; runs in the workdir (/app). The roll-up is done by rollup.py, which lives beside this
# script with its helper module lib/money.py (Harbor copies the whole solution/ directory; so does OpenForge).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p out
python3 "$here/rollup.py" --sales sales --skus skus.tsv --out out
