#!/bin/bash
# The end state over HTTP: only the verifier's check that it is reachable. The GUI demonstration is actions.json.
python3 -I - <<'PY'
import json, os, urllib.parse, urllib.request
origin = os.environ.get("WEBAPP_URL", 'http://127.0.0.1:8080')
for method, path, form in json.loads('[["POST", "/customers/3", {"city": "Houston"}]]'):
    data = urllib.parse.urlencode(form).encode() if method == "POST" else None
    req = urllib.request.Request(origin + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
PY
