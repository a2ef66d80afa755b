#!/usr/bin/env bash
# Build the offline base image openforge-base:bookworm from Debian packages (debootstrap + docker import).
#
#   scripts/build-base-image.sh [--force] [--tag NAME:TAG] [--mirror URL] [--keep-rootfs DIR]
#
# Nothing is pulled from a container registry: the root file system is made with
# `debootstrap --variant=minbase bookworm` from the machine's configured Debian mirror (the first http(s) URI of
# a `bookworm` suite in /etc/apt/sources.list{,.d/*}, else http://deb.debian.org/debian; --mirror or
# $DEBIAN_MIRROR overrides) and imported with `docker import`. Idempotent: if the image exists it is left
# alone unless --force. Prints the time the build took and the image size.
#
# Contents: what task environments, verifiers and harnesses need — bash, coreutils, python3 (+ pytest),
# procps, git, sed, gawk, grep, findutils, diffutils, file, patch, tar/gzip/xz/bzip2/unzip, jq, bc, less,
# ripgrep, iproute2, ca-certificates, tzdata-free C.UTF-8 locale. glibc is there for the native `claude`
# binary; `codex` is static musl; OpenClaw runs on the Node binary of the harness bundle (mounted read-only).
# A user `agent` (uid/gid 1000, home /home/agent) exists for running agents unprivileged; /app is the
# default working directory (owned by agent), /logs/verifier exists for verifier output.
# Requires root, debootstrap and a running dockerd (scripts/start-docker.sh).
set -euo pipefail

TAG=openforge-base:bookworm
FORCE=0
MIRROR=${DEBIAN_MIRROR:-}
KEEP=""
while (($#)); do
  case "$1" in
    --force) FORCE=1 ;;
    --tag) TAG=$2; shift ;;
    --mirror) MIRROR=$2; shift ;;
    --keep-rootfs) KEEP=$2; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[build-base-image] %s\n' "$*" >&2; }

if ! docker version >/dev/null 2>&1; then
  log "dockerd is not reachable: run scripts/start-docker.sh first"
  exit 1
fi
if [[ $FORCE -eq 0 ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG exists (use --force to rebuild): $(docker image inspect -f '{{.Size}}' "$TAG") bytes"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  log "debootstrap needs root"
  exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap (apt)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

find_mirror() {
  local f uri
  # deb822 (.sources): URIs: line in a stanza whose Suites: contains bookworm
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    uri=$(awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm([ \n]|$)/ { if (match($0, /URIs:[ \t]*[^ \t\n]+/)) { s=substr($0, RSTART, RLENGTH); sub(/URIs:[ \t]*/, "", s); print s; exit } }' "$f")
    [[ $uri == http* && $uri != *security* ]] && { echo "$uri"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    uri=$(awk '$1=="deb" && $0 ~ / bookworm / && $0 !~ /security/ { for (i=2;i<=NF;i++) if ($i ~ /^https?:/) { print $i; exit } }' "$f")
    [[ -n $uri ]] && { echo "$uri"; return; }
  done
  echo "http://deb.debian.org/debian"
}
[[ -n $MIRROR ]] || MIRROR=$(find_mirror)

PACKAGES=(
  bash coreutils procps util-linux python3 python3-pytest git sed gawk grep findutils diffutils file patch
  tar gzip xz-utils bzip2 unzip jq bc less ripgrep iproute2 ca-certificates
)

START=$SECONDS
WORK=$(mktemp -d /var/tmp/openforge-base.XXXXXX)
cleanup() { [[ -n $KEEP ]] || rm -rf --one-file-system "$WORK"; }
trap cleanup EXIT
ROOTFS=$WORK/rootfs
[[ -n $KEEP ]] && ROOTFS=$KEEP

log "debootstrap --variant=minbase bookworm from $MIRROR into $ROOTFS"
IFS=, eval 'INCLUDE="${PACKAGES[*]}"'
debootstrap --variant=minbase --include="$INCLUDE" bookworm "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
  log "debootstrap failed; last lines of its log:"
  tail -30 "$WORK/debootstrap.log" >&2
  [[ -f $ROOTFS/debootstrap/debootstrap.log ]] && tail -30 "$ROOTFS/debootstrap/debootstrap.log" >&2
  exit 1
}

log "configuring the root file system"
chroot "$ROOTFS" /bin/sh -c '
  set -e
  groupadd -g 1000 agent
  useradd -m -u 1000 -g 1000 -s /bin/bash agent
  mkdir -p /app /logs/verifier
  chown agent:agent /app
  apt-get clean
'
# Trim what a sandbox never needs.
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb \
       "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* \
       "$ROOTFS"/var/log/* "$ROOTFS"/tmp/* "$ROOTFS"/debootstrap
find "$ROOTFS"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true
# The image must not point at the host's resolver or name: docker provides these at run time.
: >"$ROOTFS"/etc/resolv.conf
echo openforge >"$ROOTFS"/etc/hostname

log "docker import -> $TAG"
tar --numeric-owner --xattrs -C "$ROOTFS" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV LC_ALL=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'WORKDIR /app' \
  --change 'CMD ["/bin/bash"]' \
  --change 'LABEL org.opencontainers.image.title=openforge-base org.openforge.base=bookworm' \
  - "$TAG" >/dev/null

SIZE=$(docker image inspect -f '{{.Size}}' "$TAG")
log "built $TAG in $((SECONDS - START))s, size $((SIZE / 1024 / 1024)) MiB ($SIZE bytes)"
