#!/bin/bash
# Reference solution; runs in the workdir (/app).
sort -u names.txt > sorted.txt
