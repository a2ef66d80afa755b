#!/bin/bash
# Reference solution; runs in the workdir (/app).
tail -n +2 scores.csv | sort -t, -k2,2 -n -r | head -n 1 | cut -d, -f1 > winner.txt
