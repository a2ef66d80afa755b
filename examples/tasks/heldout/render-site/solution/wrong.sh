#!/bin/bash
# A plausible but wrong solution: must score below 1.
mkdir -p site/assets
sed 's/{{title}}/Docs/' template.html > site/index.html
wc -c < site/index.html > site/size.txt
