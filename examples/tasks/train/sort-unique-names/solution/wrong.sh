#!/bin/bash
# A plausible but wrong solution: must score below 1.
sort names.txt > sorted.txt
