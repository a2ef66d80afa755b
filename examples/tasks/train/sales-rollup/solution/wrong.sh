#!/bin/bash
# A plausible but wrong solution: must score below 1. It leaves out the sales of unlisted SKUs instead of
# counting them under `unknown`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p out
python3 "$here/rollup.py" --sales sales --skus skus.tsv --out out --skip-unknown
