#!/bin/bash
# A plausible but wrong solution: must score below 1.
sed -i 's/localhost/db.internal/' config.yaml
