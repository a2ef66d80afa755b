#!/bin/bash
# A plausible but wrong solution: must score below 1.
for f in docs/*; do mv "$f" "${f%.*}.md"; done
