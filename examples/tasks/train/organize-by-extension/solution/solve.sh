#!/bin/bash
# Reference solution; runs in the workdir (/app).
for f in inbox/*; do e="${f##*.}"; mkdir -p "sorted/$e"; mv "$f" "sorted/$e/"; done
(cd sorted && find . -type f ! -name manifest.txt | sed 's|^\./||' | LC_ALL=C sort > manifest.txt)
