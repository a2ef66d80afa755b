#!/bin/bash
# Reference solution; runs in the workdir (/app).
printf 'errors=%s\nwarnings=%s\n' "$(grep -c ERROR server.log)" "$(grep -c WARN server.log)" > report.txt
mkdir -p archive && mv server.log archive/server.log
