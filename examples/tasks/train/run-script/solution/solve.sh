#!/bin/bash
# Reference solution; runs in the workdir (/app).
chmod +x run.sh && ./run.sh > run.out
