#!/bin/bash
# A plausible but wrong solution: must score below 1.
echo 1.4.3 > VERSION
sed -i 's/^## 1\.4\.2$/## 1.4.3\n- patch release\n\n## 1.4.2/' CHANGELOG.md
