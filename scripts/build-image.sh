#!/usr/bin/env bash
# Build the proxy/CLI image (docker/Dockerfile) FROM the offline base image: the wheels of openforge-rl and
# its dependencies at the versions in constraints.txt are collected here first (docker/wheels), so the build
# itself downloads and pulls nothing.
#
#   scripts/build-image.sh [--tag NAME:TAG] [--extras E1,E2] [--torch SPEC] [--base IMAGE]
#
# Default tag: openforge:<version> (what `openforge k8s manifests` names); extras: docker,kubernetes (the
# light core: the proxy with remote backends, and the CLI). For `serve-model` / `--backend embedded`:
# --extras engine,docker,kubernetes --torch torch==2.13.0 (PyTorch is no dependency of openforge-rl: name the
# build you want; on a machine whose package index serves the CPU build, that one). Prints the tag.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' openforge/__init__.py)
TAG=openforge:$VERSION
EXTRAS=docker,kubernetes
BASE=openforge-base:bookworm
TORCH=""
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
while (($#)); do
  case "$1" in
    --tag) TAG=$2; shift ;;
    --extras) EXTRAS=$2; shift ;;
    --torch) TORCH=$2; shift ;;
    --base) BASE=$2; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done
log() { printf '[build-image] %s\n' "$*" >&2; }

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  log "base image $BASE is missing: build it with scripts/build-base-image.sh"
  exit 1
fi
# The image's Python (the base image's) decides which binary wheels fit.
PY_IN_IMAGE=$(docker run --rm --network none --entrypoint python3 "$BASE" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
PY_HERE=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
if [ "$PY_HERE" != "$PY_IN_IMAGE" ]; then
  log "$BASE has Python $PY_IN_IMAGE but $PYTHON is $PY_HERE: set PYTHON to a Python $PY_IN_IMAGE with pip"
  exit 1
fi
log "wheels for Python $PY_IN_IMAGE (constraints.txt) -> docker/wheels"
rm -rf docker/wheels && mkdir -p docker/wheels
"$PYTHON" -m pip wheel -q --disable-pip-version-check -c constraints.txt --wheel-dir docker/wheels ".[$EXTRAS]" $TORCH
"$PYTHON" -m pip download -q --disable-pip-version-check --only-binary :all: --no-deps --dest docker/wheels \
  --python-version "$PY_IN_IMAGE" pip
log "docker build -> $TAG"
docker build -q --build-arg "BASE=$BASE" --build-arg "EXTRAS=$EXTRAS" --build-arg "PACKAGES=$TORCH" --label "org.openforge.version=$VERSION" \
  -t "$TAG" docker >/dev/null
echo "$TAG"
