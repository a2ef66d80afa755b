#!/bin/bash
# Reference solution; runs in the workdir (/app).
find . -type f -name '*.tmp' -delete
