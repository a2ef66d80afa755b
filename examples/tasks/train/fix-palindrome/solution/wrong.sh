#!/bin/bash
# A plausible but wrong solution: must score below 1.
sed -i 's/\[c for c in s if c.isalpha()\]/[c for c in s.lower()]/' textutil.py
