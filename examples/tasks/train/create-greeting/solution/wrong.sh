#!/bin/bash
# A plausible but wrong solution: must score below 1.
echo 'Hello OpenForge!' > hello.txt
