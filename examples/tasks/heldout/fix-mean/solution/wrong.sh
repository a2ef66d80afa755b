#!/bin/bash
# A plausible but wrong solution: must score below 1.
sed -i 's|sum(xs) / (len(xs) - 1)|sum(xs) // len(xs)|' stats.py
