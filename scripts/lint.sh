#!/usr/bin/env bash
# The guard rails, as CI runs them (.ci/run, before the tests): ruff's lint rules, ruff's format check and mypy,
# configured in pyproject.toml ([tool.ruff], [tool.mypy]). Every step runs; the exit status is 1 if any failed.
#   bash scripts/lint.sh          check
#   bash scripts/lint.sh --fix    apply ruff's safe fixes and format the code, then check
# Needs the dev extra (scripts/setup.sh installs it).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
for tool in ruff mypy; do
  if [ ! -x "$BIN/$tool" ]; then
    echo "lint: $BIN/$tool is missing: run bash scripts/setup.sh (it installs the dev extra)" >&2
    exit 1
  fi
done

if [ "${1:-}" = "--fix" ]; then
  "$BIN/ruff" check --fix --quiet . || true
  "$BIN/ruff" format --quiet .
fi

failed=()
step() {
  local name=$1
  shift
  echo "== $name: $*"
  if ! "$@"; then
    failed+=("$name")
  fi
}
step "ruff check" "$BIN/ruff" check --output-format concise .
step "ruff format" "$BIN/ruff" format --check .
step "mypy" "$BIN/mypy"

if [ ${#failed[@]} -gt 0 ]; then
  echo "lint: failed: ${failed[*]}" >&2
  exit 1
fi
echo "lint: ruff check, ruff format and mypy pass"
