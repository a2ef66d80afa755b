#!/bin/bash
# A plausible but wrong solution: must score below 1.
sed -i 's/.*/\L&/' SHOUT.txt && cp SHOUT.txt quiet.txt
