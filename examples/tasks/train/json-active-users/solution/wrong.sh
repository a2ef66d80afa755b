#!/bin/bash
# A plausible but wrong solution: must score below 1.
python3 -c "import json; [print(u['name']) for u in json.load(open('users.json'))]" > active.txt
