#!/bin/bash
# Reference solution; runs in the workdir (/app).
echo 'debug=true' >> settings.ini
