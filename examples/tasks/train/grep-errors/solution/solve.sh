#!/bin/bash
# Reference solution; runs in the workdir (/app).
grep 'ERROR' app.log > errors.log
