#!/bin/bash
# A plausible but wrong solution: must score below 1.
echo '{"port": "8080", "debug": false}' > config.json
