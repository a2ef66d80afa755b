#!/usr/bin/env bash
# What the test suite needs beyond Python: the pinned real harnesses (npm), and later the Docker daemon.
# Idempotent; quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[prepare]\033[0m %s\n' "$*"; }

if ! command -v npm >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing nodejs and npm (for the harness bundle)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "npm is needed to install the harnesses: install nodejs and npm" >&2
    exit 1
  fi
fi

say "harness bundle"
.venv/bin/openforge harness install
