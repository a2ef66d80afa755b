#!/bin/bash
# Reference solution; runs in the workdir (/app).
mkdir -p project/src project/tests project/docs
touch project/src/__init__.py
echo '# project' > project/README.md
