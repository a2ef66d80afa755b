#!/bin/bash
# Reference solution; runs in the workdir (/app).
tail -n 5 events.log > recent.log
