#!/bin/bash
# Reference solution; runs in the workdir (/app). migrate.py does the conversion, with the renames in
# mapping.tsv and the defaults in defaults.json.gz, all beside this script. This file has CRLF line endings
# (as a Windows checkout leaves it): they are stripped before it runs, as Harbor does.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cp -p legacy.ini legacy.ini.bak
mkdir -p config
python3 "$here/migrate.py" legacy.ini "$here/mapping.tsv" "$here/defaults.json.gz" config/service.json > config/MIGRATED
rm legacy.ini
