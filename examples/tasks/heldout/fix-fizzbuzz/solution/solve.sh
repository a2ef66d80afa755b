#!/bin/bash
# Reference solution; runs in the workdir (/app).
sed -i '0,/n % 3 == 0:/s//n % 15 == 0:\n        return "FizzBuzz"\n    if n % 3 == 0:/' fizz.py
