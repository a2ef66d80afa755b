#!/bin/bash
# Reference solution; runs in the workdir (/app).
for f in docs/*.txt; do mv "$f" "${f%.txt}.md"; done
