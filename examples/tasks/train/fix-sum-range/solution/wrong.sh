#!/bin/bash
# A plausible but wrong solution: must score below 1.
sed -i 's/range(n)/range(1, n)/' mathutil.py
