#!/bin/bash
# Reference solution; runs in the workdir (/app).
for f in photos/*; do
  b=$(basename "$f"); l=$(echo "$b" | tr 'A-Z' 'a-z')
  [ "$b" = "$l" ] || mv "$f" "photos/$l"
done
