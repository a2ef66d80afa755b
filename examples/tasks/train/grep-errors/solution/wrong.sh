#!/bin/bash
# A plausible but wrong solution: must score below 1.
grep -i 'error' app.log > errors.log
