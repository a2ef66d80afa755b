#!/bin/bash
# A plausible wrong solution through the GUI: it must score 0.
python3 -I - <<'PY'
import json, os, re, socket, sys
PATH = os.environ.get("DESKTOP_SOCKET", '/run/desktop/gui.sock')
def call(req):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60); s.connect(PATH); s.sendall(json.dumps(req).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk: break
            buf += chunk
    answer = json.loads(buf)
    if "error" in answer: sys.exit("desktop: %s: %s" % (req, answer["error"]))
    return answer
for step in json.loads("[{\"tool\": \"select\", \"target\": {\"role\": \"combobox\", \"name\": \"Contact\"}, \"value\": \"Barbara Liskov\"}, {\"tool\": \"type\", \"target\": {\"role\": \"textbox\", \"name\": \"City\"}, \"text\": \"Stanford\"}, {\"tool\": \"select\", \"target\": {\"role\": \"combobox\", \"name\": \"Contact\"}, \"value\": \"Donald Knuth\"}, {\"tool\": \"click\", \"target\": {\"role\": \"button\", \"name\": \"Save\"}}]"):
    req = {"op": step["tool"]}
    req.update({k: v for k, v in step.items() if k not in ("tool", "target")})
    if "target" in step:
        text = call({"op": "snapshot", "budget": 100000})["text"]
        refs = [m.group(1) for m in re.finditer(r'^\s*\[(\d+)\] (\S+) ("(?:[^"\\]|\\.)*")', text, re.M)
                if m.group(2) == step["target"]["role"] and json.loads(m.group(3)) == step["target"]["name"]]
        if not refs: sys.exit("no %s in:\n%s" % (step["target"], text))
        req["ref"] = refs[0]
    call(req)
PY
