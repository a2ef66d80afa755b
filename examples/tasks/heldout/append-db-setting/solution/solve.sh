#!/bin/bash
# Reference solution; runs in the workdir (/app).
echo 'max_connections=64' >> db.conf
