#!/usr/bin/env bash
# What sandboxes need beyond Python: Debian packages (bubblewrap for the local sandbox and the quickstart's
# jail, util-linux for nsenter/setpriv/prlimit, debootstrap for the base image, crun: the OCI runtime Docker
# can start containers with for less CPU, `--sandbox-option runtime=crun`), a running Docker daemon when
# one can be started, the offline base image and the GUI images built on it (Chromium: web tasks; Xvfb, GTK and
# AT-SPI: desktop tasks). Idempotent;
# quick when everything is there. Needs root.
# With --docker-optional, a machine where dockerd cannot start still succeeds (the local sandbox is used).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[sandboxes]\033[0m %s\n' "$*"; }

need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v nsenter >/dev/null || need+=(util-linux)
command -v crun >/dev/null || need+=(crun)
if ((${#need[@]})); then
  say "installing ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ "${1:-}" = "--docker-optional" ]; then
  if bash scripts/start-docker.sh && bash scripts/build-base-image.sh; then
    say "docker ready"
    bash scripts/build-gui-image.sh || say "the GUI image could not be built: GUI tasks will not run here"
    bash scripts/build-gui-image.sh --desktop || say "the desktop image could not be built: desktop tasks will not run here"
  else
    say "no Docker daemon here: the local sandbox will be used"
  fi
else
  say "docker daemon"
  bash scripts/start-docker.sh
  say "offline base image"
  bash scripts/build-base-image.sh
  say "GUI image (the base image + Chromium)"
  bash scripts/build-gui-image.sh
  say "desktop image (the base image + Xvfb, GTK 3, AT-SPI)"
  bash scripts/build-gui-image.sh --desktop
fi
