#!/bin/bash
# A plausible but wrong solution: must score below 1.
awk -F, 'NR > 1 { s += $3 } END { print s }' sales.csv > total.txt
