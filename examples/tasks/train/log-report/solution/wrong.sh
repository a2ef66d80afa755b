#!/bin/bash
# A plausible but wrong solution: must score below 1.
printf 'errors=%s\nwarnings=%s\n' "$(grep -c ERROR server.log)" "$(grep -c WARNING server.log)" > report.txt
mkdir -p archive && mv server.log archive/server.log
