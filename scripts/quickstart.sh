#!/usr/bin/env bash
# The main job on the embedded defaults: sets everything up, then runs `openforge quickstart`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/prepare-sandboxes.sh --docker-optional
exec .venv/bin/openforge quickstart "$@"
