#!/bin/bash
# Reference solution; runs in the workdir (/app).
awk -F, 'NR == 1 || $2 == "NO"' people.csv > norway.csv
