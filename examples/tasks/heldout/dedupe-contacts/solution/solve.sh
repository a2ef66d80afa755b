#!/bin/bash
# Reference solution; runs in the workdir (/app).
awk '!seen[$0]++' contacts.csv > contacts.tmp && mv contacts.tmp contacts.csv
