#!/bin/bash
# Reference solution; runs in the workdir (/app).
wc -w < essay.txt > count.txt
