#!/bin/bash
# A plausible but wrong solution: must score below 1.
wc -w essay.txt > count.txt
