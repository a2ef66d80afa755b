#!/bin/bash
# Reference solution; runs in the workdir (/app).
mkdir -p site/assets
sed 's/{{title}}/Docs/g' template.html > site/index.html
wc -c < site/index.html > site/size.txt
