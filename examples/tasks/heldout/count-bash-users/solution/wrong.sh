#!/bin/bash
# A plausible but wrong solution: must score below 1.
grep -c '/bin/bash' passwd > bash_users.txt
