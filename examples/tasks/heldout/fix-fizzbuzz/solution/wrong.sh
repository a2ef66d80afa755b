#!/bin/bash
# A plausible but wrong solution: must score below 1.
sed -i 's/n % 15 == 0/n % 5 == 0 and n % 3 == 0/' fizz.py
