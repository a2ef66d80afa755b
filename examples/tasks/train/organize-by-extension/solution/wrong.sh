#!/bin/bash
# A plausible but wrong solution: must score below 1.
for f in inbox/*; do e="${f##*.}"; mkdir -p "sorted/$e"; cp "$f" "sorted/$e/"; done
(cd sorted && find . -type f ! -name manifest.txt | sed 's|^\./||' | LC_ALL=C sort > manifest.txt)
