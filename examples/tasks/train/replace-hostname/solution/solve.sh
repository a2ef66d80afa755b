#!/bin/bash
# Reference solution; runs in the workdir (/app).
sed -i 's/localhost/db.internal/g' config.yaml
