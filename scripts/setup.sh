#!/usr/bin/env bash
# Create .venv and install OpenForge (the distribution openforge-rl) with everything its commands and tests need,
# at the versions in constraints.txt (the tested ones). Idempotent and quick when nothing changed. Works on a
# fresh Debian/Ubuntu machine with Python >= 3.11 (installs python3-venv if needed).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# torch is pinned to a CPU build: an unpinned torch pulls a multi-GB CUDA build.
TORCH_SPEC=${OPENFORGE_TORCH_SPEC:-torch==2.13.0}
EXTRAS=${OPENFORGE_EXTRAS:-dev}

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "OpenForge needs Python >= 3.11; $PYTHON is $("$PYTHON" --version 2>&1). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  if ! "$PYTHON" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing python3-venv"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$PYTHON" -m venv .venv
    else
      echo "python -m venv failed: install your distribution's python3-venv package" >&2
      exit 1
    fi
  fi
  .venv/bin/python -m pip install -q --upgrade pip
fi

# Reinstall only when the project's requirements (or the requested extras) changed.
stamp=.venv/.openforge-installed
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1) $TORCH_SPEC $EXTRAS"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
    say "installing $TORCH_SPEC"
    .venv/bin/pip install -q -c constraints.txt "$TORCH_SPEC"
  fi
  say "installing openforge-rl[$EXTRAS] (constraints.txt)"
  .venv/bin/pip install -q -c constraints.txt -e ".[$EXTRAS]"
  echo "$want" > "$stamp"
fi
