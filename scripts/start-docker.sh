#!/usr/bin/env bash
# Make sure a Docker daemon is running and reachable; safe to call repeatedly (CI, quickstart, tests).
#
#   scripts/start-docker.sh            install docker.io if missing (apt, as root), start dockerd if not running,
#                                      wait until it answers, print the essentials of `docker info`
#   DOCKERD_OPTS="--storage-driver=vfs" scripts/start-docker.sh    extra dockerd options
#
# dockerd needs no extra options on the development machine (Debian 12, cgroup v1 hybrid, ext4 root:
# overlay2 and the cgroupfs driver are picked by default). Where overlay2 is unusable (e.g. a root file
# system on overlayfs without support for nested overlays) the script retries once with --storage-driver=vfs.
# Where crun is installed (scripts/prepare-sandboxes.sh installs it) and no daemon.json declares runtimes, the
# daemon is started with it registered (--add-runtime crun=PATH: `--sandbox-option runtime=crun`); on a host
# that mounts cgroup v1 and v2 together, crun refuses to start containers while a controller is on the v2
# side, so such a controller (hugetlb, here) is mounted on the v1 side first.
# Log: ${DOCKERD_LOG:-/var/log/dockerd.log}.
set -euo pipefail

log() { printf '[start-docker] %s\n' "$*" >&2; }

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
WAIT_S=${DOCKERD_WAIT_S:-60}

reachable() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

print_info() {
  docker info --format \
'server {{.ServerVersion}} · storage {{.Driver}} · cgroup v{{.CgroupVersion}} ({{.CgroupDriver}}) · {{.NCPU}} CPUs · {{.MemTotal}} bytes · memory-limit {{.MemoryLimit}} · swap-limit {{.SwapLimit}} · pids-limit {{.PidsLimit}} · cpu-cfs {{.CPUCfsQuota}}{{println}}' 2>/dev/null \
  || docker info
}

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    log "docker is not installed and this is not root: install docker.io (apt-get install -y docker.io) first"
    exit 1
  fi
  log "installing docker.io (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi

if reachable; then
  log "dockerd already running"
  if command -v crun >/dev/null 2>&1 && ! docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"crun"'; then
    log "crun is installed but this daemon has not registered it: containers run under its default runtime" \
      "(stop dockerd and run this script again to start it with crun)"
  fi
  print_info
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  log "dockerd is not reachable and this is not root: start it as root (sudo $0) or add yourself to the docker group"
  exit 1
fi

start_dockerd() {
  # Another dockerd may be starting (concurrent callers): only start one if no dockerd process exists.
  if pgrep -x dockerd >/dev/null 2>&1; then
    log "a dockerd process exists; waiting for it"
  else
    log "starting dockerd $* (log: $DOCKERD_LOG)"
    # setsid: the daemon must outlive this script and the caller's process group (pytest, CI step).
    setsid dockerd "$@" >>"$DOCKERD_LOG" 2>&1 < /dev/null &
  fi
  local deadline=$((SECONDS + WAIT_S))
  while (( SECONDS < deadline )); do
    reachable && return 0
    pgrep -x dockerd >/dev/null 2>&1 || return 1
    sleep 0.5
  done
  return 1
}

# crun, registered where nothing else declares the daemon's runtimes (a second declaration stops dockerd)
runtime_opts=()
crun_path=$(command -v crun || true)
if [[ -n "$crun_path" && "${DOCKERD_OPTS:-}" != *add-runtime* ]] \
  && ! grep -qs '"runtimes"' /etc/docker/daemon.json; then
  runtime_opts=(--add-runtime "crun=$crun_path")
  # hybrid cgroups (v1 controllers beside a v2 hierarchy): crun wants no controller on the v2 side
  v2=/sys/fs/cgroup/unified
  if [[ -f $v2/cgroup.controllers && -d /sys/fs/cgroup/cpu && -z "$(tr -d '[:space:]' < $v2/cgroup.subtree_control)" ]]; then
    for controller in $(cat $v2/cgroup.controllers); do
      if [[ ! -d /sys/fs/cgroup/$controller ]] || ! mountpoint -q "/sys/fs/cgroup/$controller"; then
        mkdir -p "/sys/fs/cgroup/$controller"
        mount -t cgroup -o "$controller" cgroup "/sys/fs/cgroup/$controller" \
          && log "mounted the $controller cgroup controller on the v1 side (for crun)" \
          || log "could not move $controller to cgroup v1: crun will not start containers here"
      fi
    done
  fi
fi

# shellcheck disable=SC2086
if ! start_dockerd ${DOCKERD_OPTS:-} "${runtime_opts[@]}"; then
  if [[ -z "${DOCKERD_OPTS:-}" ]] && grep -q 'overlay' "$DOCKERD_LOG" 2>/dev/null && ! pgrep -x dockerd >/dev/null; then
    log "dockerd failed with the default storage driver; retrying with --storage-driver=vfs"
    start_dockerd --storage-driver=vfs "${runtime_opts[@]}" || { log "dockerd did not start; see $DOCKERD_LOG"; tail -20 "$DOCKERD_LOG" >&2; exit 1; }
  else
    log "dockerd did not become reachable within ${WAIT_S}s; see $DOCKERD_LOG"
    tail -20 "$DOCKERD_LOG" >&2 || true
    exit 1
  fi
fi
log "dockerd is up"
print_info
