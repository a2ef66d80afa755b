#!/bin/bash
# Reference solution; runs in the workdir (/app).
sed -i 's/(len(xs) - 1)/len(xs)/' stats.py
