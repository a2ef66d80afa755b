#!/bin/bash
# Reference solution; runs in the workdir (/app).
sed -i 's/range(n)/range(1, n + 1)/' mathutil.py
