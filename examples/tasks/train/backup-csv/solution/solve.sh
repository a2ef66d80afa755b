#!/bin/bash
# Reference solution; runs in the workdir (/app).
mkdir -p backup && cp data/*.csv backup/
