#!/usr/bin/env bash
# The test suite: sets everything up (Python env, harness bundle, ...), then runs pytest.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/prepare-test-env.sh
exec .venv/bin/python -m pytest "$@"
