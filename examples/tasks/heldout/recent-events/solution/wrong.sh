#!/bin/bash
# A plausible but wrong solution: must score below 1.
head -n 5 events.log > recent.log
