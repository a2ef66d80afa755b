#!/bin/bash
# A plausible but wrong solution: must score below 1.
python3 -c "import json; print(len(json.load(open('order.json'))['items']))" > units.txt
