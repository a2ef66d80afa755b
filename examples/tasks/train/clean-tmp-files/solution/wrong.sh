#!/bin/bash
# A plausible but wrong solution: must score below 1.
rm -f *.tmp obj/*.tmp
