#!/bin/bash
# A plausible but wrong solution: must score below 1.
sh run.sh > run.out
