#!/bin/bash
# A plausible but wrong solution: must score below 1.
sort -u contacts.csv -o contacts.csv
