#!/usr/bin/env bash
# What the test suite needs beyond Python: the sandboxes' prerequisites (scripts/prepare-sandboxes.sh: Debian
# packages, a running Docker daemon, the offline base image), veRL's core functions, and the pinned real
# harnesses (npm). Idempotent; quick when everything is already there. Needs root for apt and dockerd.
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
  .venv/bin/pip install -q "ray>=2.41.0" "tensordict>=0.8.0,<=0.10.0,!=0.9.0" omegaconf codetiming
fi
# The agent loop tests also import veRL's agent loop (hydra, datasets, cachetools) and its v1 trainer's
# post-processing (TransferQueue, torchdata, peft, accelerate: imported, not run; without their own deps).
if ! .venv/bin/python -c "import verl.experimental.agent_loop, verl.trainer.ppo.v1" 2>/dev/null; then
  say "veRL 0.9.1 agent loop and v1 trainer imports"
  .venv/bin/pip install -q hydra-core datasets cachetools pyzmq msgspec
  .venv/bin/pip install -q --no-deps "transferqueue==0.1.11" "torchdata==0.11.0" peft accelerate
fi

say "harness bundle"
.venv/bin/openforge harness install
