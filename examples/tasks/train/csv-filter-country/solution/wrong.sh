#!/bin/bash
# A plausible but wrong solution: must score below 1.
grep ',NO,' people.csv > norway.csv
