#!/bin/bash
# A plausible but wrong solution: must score below 1.
for f in photos/*; do
  e=$(echo "${f##*.}" | tr 'A-Z' 'a-z')
  [ "$f" = "${f%.*}.$e" ] || mv "$f" "${f%.*}.$e"
done
