#!/usr/bin/env bash
# Build veRL's parquet files from Harbor-format tasks: one row per task per harness (harnesses mixed in a batch).
set -euo pipefail
TASKS=${TASKS:-/data/openforge/tasks}
OUT=${OUT:-/data/openforge/verl}
HARNESSES=${HARNESSES:-react,claude-code,codex}
openforge verl dataset --tasks "$TASKS" --harness "$HARNESSES" --split train --out "$OUT/train.parquet"
openforge verl dataset --tasks "$TASKS" --harness "$HARNESSES" --split heldout --out "$OUT/heldout.parquet"
