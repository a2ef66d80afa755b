#!/bin/bash
# A plausible but wrong solution: must score below 1.
mkdir -p backup && mv data/*.csv backup/
