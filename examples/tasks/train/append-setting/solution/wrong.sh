#!/bin/bash
# A plausible but wrong solution: must score below 1.
echo 'debug=true' > settings.ini
