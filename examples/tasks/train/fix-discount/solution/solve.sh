#!/bin/bash
# Reference solution; runs in the workdir (/app).
sed -i 's/price \* percent/price * percent \/ 100/' pricing.py
