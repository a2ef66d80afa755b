#!/bin/bash
# A plausible but wrong solution: must score below 1.
sed -i 's/price - price \* percent/price * percent \/ 100/' pricing.py
