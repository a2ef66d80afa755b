#!/bin/bash
# Reference solution; runs in the workdir (/app).
tr 'A-Z' 'a-z' < SHOUT.txt > quiet.txt
