#!/usr/bin/env bash
# Build the GUI base image openforge-gui:bookworm: the offline base image (scripts/build-base-image.sh) plus
# Debian's `chromium` (at /usr/bin/chromium) and `fonts-dejavu-core`, and a system user `webapp` (uid/gid 990,
# no login shell) for the web apps GUI tasks serve inside their sandbox (docs/design.md, "GUI tasks").
# With --desktop, the desktop image openforge-desktop:bookworm instead: the base image plus Debian's Xvfb, a small
# window manager (matchbox), GTK 3 for python3 (python3-gi), AT-SPI (at-spi2-core, python3-pyatspi), xdotool and
# fonts-dejavu-core, and a system user `deskapp` (uid/gid 991) for the desktop apps of desktop tasks.
#
#   scripts/build-gui-image.sh [--desktop] [--force] [--tag NAME:TAG] [--base NAME:TAG] [--mirror URL]
#
# Nothing is pulled from a container registry: a container of the base image installs the packages with apt
# from the Debian mirror the base image was bootstrapped from (--mirror or $DEBIAN_MIRROR overrides it), using
# the host's network for that one step, and is committed. Idempotent: if the image exists it is left alone
# unless --force. Prints the time the build took and the image size. Requires a running dockerd and the base
# image.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=
BASE=openforge-base:bookworm
DESKTOP=0
FORCE=0
MIRROR=${DEBIAN_MIRROR:-}
while (($#)); do
  case "$1" in
    --force) FORCE=1 ;;
    --desktop) DESKTOP=1 ;;
    --tag) TAG=$2; shift ;;
    --base) BASE=$2; shift ;;
    --mirror) MIRROR=$2; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[build-gui-image] %s\n' "$*" >&2; }

if [[ $DESKTOP -eq 1 ]]; then
  TAG=${TAG:-openforge-desktop:bookworm}
  PACKAGES="xvfb matchbox-window-manager xdotool python3-gi gir1.2-gtk-3.0 at-spi2-core python3-pyatspi fonts-dejavu-core"
  APP_USER=deskapp APP_ID=991 KIND=desktop CHECK=/usr/bin/Xvfb
else
  TAG=${TAG:-openforge-gui:bookworm}
  PACKAGES="chromium fonts-dejavu-core"
  APP_USER=webapp APP_ID=990 KIND=chromium CHECK=/usr/bin/chromium
fi

if ! docker version >/dev/null 2>&1; then
  log "dockerd is not reachable: run scripts/start-docker.sh first"
  exit 1
fi
if [[ $FORCE -eq 0 ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG exists (use --force to rebuild): $(docker image inspect -f '{{.Size}}' "$TAG") bytes"
  exit 0
fi
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  log "the base image $BASE is missing: build it with scripts/build-base-image.sh"
  exit 1
fi

# Inside the container: the mirror (if given) replaces the base image's sources, the packages are installed
# without recommended ones (no desktop services), apt's lists and caches are removed again.
INSTALL='
set -e
if [ -n "$MIRROR" ]; then echo "deb $MIRROR bookworm main" > /etc/apt/sources.list; fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
groupadd -r -g $APP_ID $APP_USER
useradd -r -u $APP_ID -g $APP_ID -d /nonexistent -s /usr/sbin/nologin $APP_USER
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* /var/log/* /tmp/*
test -x $CHECK
'

START=$SECONDS
NAME=openforge-gui-build-$$
cleanup() { docker rm -f "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
log "installing $PACKAGES into $BASE${MIRROR:+ from $MIRROR}"
# the mirror and the lists go into the script itself (not the container's environment, which the commit would keep)
VARS="MIRROR='$MIRROR'; PACKAGES='$PACKAGES'; APP_USER=$APP_USER; APP_ID=$APP_ID; CHECK=$CHECK"
if ! docker run --name "$NAME" --network host --user 0:0 "$BASE" /bin/sh -c "$VARS; $INSTALL" \
    >"/tmp/$NAME.log" 2>&1; then
  log "installing the packages failed; last lines:"
  tail -30 "/tmp/$NAME.log" >&2
  rm -f "/tmp/$NAME.log"
  exit 1
fi
rm -f "/tmp/$NAME.log"

log "docker commit -> $TAG"
docker commit \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV LC_ALL=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'WORKDIR /app' \
  --change 'USER 0:0' \
  --change 'CMD ["/bin/bash"]' \
  --change "LABEL org.opencontainers.image.title=${TAG%%:*} org.openforge.base=bookworm org.openforge.gui=$KIND" \
  "$NAME" "$TAG" >/dev/null

SIZE=$(docker image inspect -f '{{.Size}}' "$TAG")
log "built $TAG in $((SECONDS - START))s, size $((SIZE / 1024 / 1024)) MiB ($SIZE bytes)"
