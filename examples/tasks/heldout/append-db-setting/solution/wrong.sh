#!/bin/bash
# A plausible but wrong solution: must score below 1.
sed -i '1i max_connections=64' db.conf
