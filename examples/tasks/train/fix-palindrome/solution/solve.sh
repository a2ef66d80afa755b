#!/bin/bash
# Reference solution; runs in the workdir (/app).
sed -i 's/\[c for c in s if c.isalpha()\]/[c.lower() for c in s if c.isalpha()]/' textutil.py
