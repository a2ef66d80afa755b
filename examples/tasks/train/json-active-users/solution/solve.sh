#!/bin/bash
# Reference solution; runs in the workdir (/app).
python3 -c "import json; [print(u['name']) for u in json.load(open('users.json')) if u['active']]" > active.txt
