#!/bin/bash
# Reference solution; runs in the workdir (/app).
echo 1.4.3 > VERSION
sed -i 's/1\.4\.2/1.4.3/' pkg/__init__.py
sed -i 's/^## 1\.4\.2$/## 1.4.3\n- patch release\n\n## 1.4.2/' CHANGELOG.md
