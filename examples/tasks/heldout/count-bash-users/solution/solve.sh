#!/bin/bash
# Reference solution; runs in the workdir (/app).
awk -F: '$NF == "/bin/bash"' passwd | wc -l > bash_users.txt
