#!/bin/bash
# Reference solution; runs in the workdir (/app).
echo '{"port": 8080, "debug": false}' > config.json
