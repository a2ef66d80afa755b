#!/bin/bash
# A plausible but wrong solution: must score below 1.
mkdir -p project/src project/docs
touch project/src/__init__.py
echo '# project' > project/README.md
