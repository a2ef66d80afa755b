#!/usr/bin/env bash
# What the test suite needs beyond Python: Debian packages (bubblewrap for the local sandbox, debootstrap for
# the base image, docker.io), a running Docker daemon, the offline base image, and the pinned real harnesses
# (npm). Idempotent; quick when everything is already there. Needs root for apt and dockerd.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[prepare]\033[0m %s\n' "$*"; }

need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v nsenter >/dev/null || need+=(util-linux)
if ((${#need[@]})); then
  say "installing ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

say "docker daemon"
bash scripts/start-docker.sh
say "offline base image"
bash scripts/build-base-image.sh

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
