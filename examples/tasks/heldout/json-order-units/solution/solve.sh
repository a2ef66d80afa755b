#!/bin/bash
# Reference solution; runs in the workdir (/app).
python3 -c "import json; print(sum(i['qty'] for i in json.load(open('order.json'))['items']))" > units.txt
