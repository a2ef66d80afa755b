#!/bin/bash
# A plausible but wrong solution: must score below 1.
head -n 1 access.log | cut -d' ' -f1 > top_ip.txt
