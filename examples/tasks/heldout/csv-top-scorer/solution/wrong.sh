#!/bin/bash
# A plausible but wrong solution: must score below 1.
tail -n +2 scores.csv | sort -t, -k2,2 -r | head -n 1 | cut -d, -f1 > winner.txt
