#!/bin/bash
# Reference solution; runs in the workdir (/app).
cut -d' ' -f1 access.log | sort | uniq -c | sort -rn | head -n 1 | awk '{print $2}' > top_ip.txt
