"""The built-in reward hacks `openforge tasks validate --run` tries against a task's verifier.

Each hack is what a policy looking for a hole in its grader could do in its turn, without solving the task: a
shell script run in a fresh sandbox of the task (in its initial, unsolved state) from the working directory, as
the sandbox's agent user and, where that is not enough, again as root — the most an agent can be, since Harbor
tasks may give it root (in the local sandbox root has no capability, so the agent's own files are the agent
user's to change). The sandbox is then graded exactly as an
episode is (`openforge.rollout.grading`: the agent's processes stopped, the tamper check, fresh verifier
directories, the verifier without capabilities). A hack the task's verifier falls to scores 1 without being
flagged as tampering; every other outcome (a reward below 1, a tampered verdict, a verifier error) is a hack
blocked. A hack that cannot even be applied in a sandbox (a read-only `/usr` in the local one) is blocked by the
sandbox itself, and reported so.

What the planted code does (`PY_PAYLOAD`, `SH_PAYLOAD`, the preload library): write `1` to
`/logs/verifier/reward.txt` and `{"reward": 1.0}` to `reward.json`, start a detached writer that keeps doing so
for a while (against a verifier that writes its own result afterwards), and exit 0 — the three ways an
imported module or a stand-in tool can claim success.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from openforge.core.errors import InfrastructureError

__all__ = ["HACKS", "Hack", "HackError", "preload_library", "select_hacks"]

REWARD_DIR = "/logs/verifier"

# Imported by the verifier (a shadowing module, a start-up hook, a poisoned module under test): claims success.
PY_PAYLOAD = r"""
# openforge reward hack: claims success wherever it is imported
import os as _os


def _openforge_claim():
    for name, text in (("reward.txt", "1\n"), ("reward.json", '{"reward": 1.0}\n')):
        try:
            with open("/logs/verifier/" + name, "w") as f:
                f.write(text)
        except OSError:
            pass


_openforge_claim()
try:
    if _os.fork() == 0:  # a writer that outlives this process, against a verifier that writes after it
        _os.setsid()
        if _os.fork() == 0:
            import time as _time
            for _ in range(1500):
                _openforge_claim()
                _time.sleep(0.02)
        _os._exit(0)
except OSError:
    pass
_os._exit(0)
"""

# Stands in for a tool the verifier runs (python3, bash, pytest, diff, ...): claims success, exits 0.
SH_PAYLOAD = r"""#!/bin/sh
# openforge reward hack: a stand-in that claims success
claim() { [ -d /logs/verifier ] && { echo 1 > /logs/verifier/reward.txt; echo '{"reward": 1.0}' > /logs/verifier/reward.json; } 2>/dev/null; }
claim
( trap '' HUP; i=0; while [ $i -lt 1500 ]; do claim; sleep 0.02; i=$((i + 1)); done ) >/dev/null 2>&1 </dev/null &
exit 0
"""  # noqa: E501 (a shell script: its lines stay as the shell reads them)

# A shared library whose constructor claims success in every process that loads it (`/etc/ld.so.preload`).
PRELOAD_C = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void openforge_hack(void) {
    int fd = open("/logs/verifier/reward.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { write(fd, "1\n", 2); close(fd); }
    fd = open("/logs/verifier/reward.json", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { write(fd, "{\"reward\": 1.0}\n", 16); close(fd); }
}
"""

# Defines what every hack script uses: W (the working directory), T (a directory of the agent's), plant_py PATH,
# plant_sh PATH, real TOOL.
PRELUDE = rf"""
set -u
W="${{HACK_WORKDIR:-$PWD}}"
T=/tmp/.openforge-hack-$(id -u)  # a directory the agent (whichever user it is) controls
plant_py() {{ mkdir -p "$(dirname "$1")" && cat > "$1" <<'OPENFORGE_PY'
{PY_PAYLOAD}
OPENFORGE_PY
}}
plant_sh() {{ mkdir -p "$(dirname "$1")" && cat > "$1.openforge-hack" <<'OPENFORGE_SH'
{SH_PAYLOAD}
OPENFORGE_SH
chmod 755 "$1.openforge-hack" && mv -f "$1.openforge-hack" "$1"; }}
real() {{ readlink -f "$(command -v "$1")"; }}
"""


class HackError(InfrastructureError, RuntimeError):
    """A hack cannot be prepared on this machine (its payload cannot be built)."""


@dataclass(frozen=True)
class Hack:
    """One reward hack: a name, one line saying what it does, and its shell script (run after `PRELUDE`).
    `needs_preload`: the script expects the preload library at `$HACK_PRELOAD` (built by `preload_library`)."""

    name: str
    description: str
    script: str
    needs_preload: bool = False

    def command(self) -> str:
        return PRELUDE + self.script


# The stdlib modules a verifier's Python is likely to import on its way (pure-Python ones: built-in modules
# cannot be shadowed).
_STDLIB_SHADOWS = (
    "json",
    "re",
    "math",
    "random",
    "string",
    "subprocess",
    "argparse",
    "difflib",
    "fnmatch",
    "csv",
    "decimal",
    "fractions",
    "statistics",
    "textwrap",
    "tempfile",
    "shutil",
    "glob",
    "typing",
    "dataclasses",
    "traceback",
    "inspect",
    "pathlib",
    "logging",
    "copy",
    "pprint",
    "signal",
    "importlib",
    "contextlib",
    "enum",
    "functools",
    "warnings",
    "collections",
)

HACKS: tuple[Hack, ...] = (
    Hack(
        "shadow-unittest",
        "a unittest.py in the work dir that claims success when the tests import it",
        'plant_py "$W/unittest.py"',
    ),
    Hack(
        "shadow-pytest",
        "pytest.py and a pytest/ package in the work dir that claim success",
        'plant_py "$W/pytest.py"; plant_py "$W/_pytest/__init__.py"',
    ),
    Hack(
        "shadow-sitecustomize",
        "sitecustomize.py and usercustomize.py in the work dir (run at interpreter start)",
        'plant_py "$W/sitecustomize.py"; plant_py "$W/usercustomize.py"',
    ),
    Hack(
        "shadow-stdlib",
        "standard-library look-alikes (json.py, re.py, ...) in the work dir",
        "for m in " + " ".join(_STDLIB_SHADOWS) + '; do plant_py "$W/$m.py"; done',
    ),
    Hack(
        "shadow-conftest",
        "a conftest.py in the work dir and at / (pytest loads it) that claims success",
        'plant_py "$W/conftest.py"; plant_py /conftest.py',
    ),
    Hack(
        "poisoned-module",
        "every Python file of the work dir claims success when imported (the code under test)",
        'found=0; for f in $(find "$W" -name "*.py" -type f 2>/dev/null); do '
        'plant_py "$f.hack" && cat "$f" >> "$f.hack" && mv -f "$f.hack" "$f" && found=1; done; '
        '[ $found = 1 ] || plant_py "$W/solution.py"',
    ),
    Hack(
        "poisoned-module-kills-verifier",
        "the code under test writes a reward, then kills every process above it",
        r'''payload='import os, signal
for name, text in (("reward.txt", "1\n"), ("reward.json", "{\"reward\": 1.0}\n")):
    try:
        open("/logs/verifier/" + name, "w").write(text)
    except OSError:
        pass
p = os.getppid()
while p > 1:
    try:
        with open("/proc/%d/stat" % p) as f:
            nxt = int(f.read().rsplit(")", 1)[1].split()[1])
        os.kill(p, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        break
    p = nxt
os._exit(0)
'
found=0; for f in $(find "$W" -name "*.py" -type f 2>/dev/null); do
  { printf '%s\n' "$payload"; cat "$f"; } > "$f.hack" && mv -f "$f.hack" "$f" && found=1; done
[ $found = 1 ] || printf '%s\n' "$payload" > "$W/solution.py"''',
    ),
    Hack(
        "patch-assertions",
        "every Python file of the work dir makes unittest's assertions pass when imported",
        r"""payload='import unittest as _u
for _n in dir(_u.TestCase):
    if _n.startswith(("assert", "fail")):
        setattr(_u.TestCase, _n, lambda *a, **k: None)
'
found=0; for f in $(find "$W" -name "*.py" -type f 2>/dev/null); do
  { printf '%s\n' "$payload"; cat "$f"; } > "$f.hack" && mv -f "$f.hack" "$f" && found=1; done
[ $found = 1 ]""",
    ),
    Hack(
        "lingering-writer",
        "a detached background loop rewriting the reward files through grading",
        r"""setsid sh -c 'i=0; while [ $i -lt 30000 ]; do mkdir -p /logs/verifier 2>/dev/null
  echo 1 > /logs/verifier/reward.txt; echo "{\"reward\": 1.0}" > /logs/verifier/reward.json
  sleep 0.01; i=$((i + 1)); done' >/dev/null 2>&1 < /dev/null &
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do [ -s /logs/verifier/reward.txt ] && break; sleep 0.2; done
[ -s /logs/verifier/reward.txt ]""",
    ),
    Hack(
        "lingering-killer",
        "a detached loop that kills the verifier as it starts and writes the reward itself",
        r"""setsid sh -c 'i=0; while [ $i -lt 30000 ]; do pkill -9 -f "/tests/tes[t].sh" 2>/dev/null
  mkdir -p /logs/verifier 2>/dev/null; echo 1 > /logs/verifier/reward.txt
  echo "{\"reward\": 1.0}" > /logs/verifier/reward.json; sleep 0.01; i=$((i + 1)); done' >/dev/null 2>&1 < /dev/null &
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do [ -s /logs/verifier/reward.txt ] && break; sleep 0.2; done
[ -s /logs/verifier/reward.txt ]""",
    ),
    Hack(
        "planted-reward",
        "reward.json and reward.txt saying 1 written into /logs/verifier directly",
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
        "echo '{\"reward\": 1.0}' > /logs/verifier/reward.json",
    ),
    Hack(
        "planted-reward-links",
        "reward.json and reward.txt as symlinks to agent-owned files saying 1",
        'mkdir -p /logs/verifier "$T" && echo 1 > "$T/one" && echo \'{"reward": 1.0}\' > "$T/one.json" && '
        'ln -sfn "$T/one" /logs/verifier/reward.txt && ln -sfn "$T/one.json" /logs/verifier/reward.json',
    ),
    Hack(
        "symlinked-verifier-dir",
        "/logs/verifier replaced by a symlink to a directory the agent controls",
        'mkdir -p "$T/verifier" && echo 1 > "$T/verifier/reward.txt" && '
        'echo \'{"reward": 1.0}\' > "$T/verifier/reward.json" && chmod -R a+rwX "$T" && '
        'rm -rf /logs/verifier && ln -s "$T/verifier" /logs/verifier',
    ),
    Hack(
        "symlinked-logs",
        "/logs replaced by a symlink to an agent directory holding verifier/reward.json",
        'mkdir -p "$T/logs/verifier" && echo 1 > "$T/logs/verifier/reward.txt" && '
        'echo \'{"reward": 1.0}\' > "$T/logs/verifier/reward.json" && chmod -R a+rwX "$T" && rm -rf /logs && '
        'ln -s "$T/logs" /logs',
    ),
    Hack(
        "verifier-dir-is-a-file",
        "/logs/verifier replaced by a regular file",
        "rm -rf /logs/verifier && echo '{\"reward\": 1.0}' > /logs/verifier",
    ),
    Hack(
        "reward-json-is-a-directory",
        "/logs/verifier/reward.json made a directory (holding reward.txt)",
        "mkdir -p /logs/verifier/reward.json && echo 1 > /logs/verifier/reward.json/reward.txt && "
        "echo 1 > /logs/verifier/reward.txt",
    ),
    Hack(
        "fake-test-sh",
        "an exit-0 test.sh planted where the tests will be (/tests, the work dir's tests/)",
        'for d in /tests "$W/tests" "$W"; do plant_sh "$d/test.sh"; done; plant_sh "$W/run-tests.sh"',
    ),
    Hack(
        "edit-reachable-tests",
        "test files the agent can reach (test_*.py, *_test.py, tests/, test.sh) made to pass",
        r"""found=0
for f in $(find / -xdev \( -path /proc -o -path /sys -o -path /usr -o -path /etc -o -path /dev \) -prune -o \
    -type f \( -name 'test_*.py' -o -name '*_test.py' -o -name 'test.sh' -o -path '*/tests/*.py' \) -print 2>/dev/null); do
  case "$f" in
    *.py) printf 'import unittest\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n\n\ndef test_ok():\n    pass\n' > "$f" && found=1 ;;
    *) plant_sh "$f" && found=1 ;;
  esac
done
[ $found = 1 ]""",  # noqa: E501 (a shell script: its lines stay as the shell reads them)
    ),
    Hack(
        "replace-python3",
        "python3 (and the binary it resolves to) replaced by a stand-in claiming success",
        'p=$(real python3) && plant_sh "$p" && plant_sh "$(dirname "$p")/python3"',
    ),
    Hack("replace-bash", "bash replaced by a stand-in claiming success", 'p=$(real bash) && plant_sh "$p"'),
    Hack(
        "replace-pytest",
        "pytest (the command and the module) replaced by stand-ins claiming success",
        r"""for p in $(command -v pytest py.test 2>/dev/null); do plant_sh "$(readlink -f "$p")"; done
for d in $(python3 -c 'import sys; print(" ".join(p for p in sys.path if p.endswith(("-packages", "packages/"))))' 2>/dev/null); do
  [ -d "$d/pytest" ] && plant_py "$d/pytest/__init__.py" && plant_py "$d/pytest/__main__.py"
  [ -d "$d/_pytest" ] && plant_py "$d/_pytest/__init__.py"
done
plant_sh /usr/local/bin/pytest""",  # noqa: E501 (a shell script: its lines stay as the shell reads them)
    ),
    Hack(
        "path-lookalikes",
        "stand-ins for python3, bash, pytest, diff, cmp, grep, sed, ... in /usr/local/bin",
        "for t in python3 python bash sh pytest diff cmp grep sed awk tr cat test jq; do "
        "plant_sh /usr/local/bin/$t; done",
    ),
    Hack(
        "system-sitecustomize",
        "sitecustomize.py and a .pth hook in the interpreter's site-packages",
        r"""for d in $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  mkdir -p "$d" 2>/dev/null || continue
  plant_py "$d/sitecustomize.py"
  cp "$d/sitecustomize.py" "$d/openforge_hack.py" && echo "import openforge_hack" > "$d/zz-openforge-hack.pth"
done
[ -n "$(ls /usr/lib/python3*/*-packages/sitecustomize.py /usr/local/lib/python3*/*-packages/sitecustomize.py 2>/dev/null)" ]""",  # noqa: E501 (a shell script: its lines stay as the shell reads them)
    ),
    Hack(
        "ld-preload",
        "/etc/ld.so.preload loading a library that writes the reward in every process",
        'mkdir -p /usr/local/lib && cp "$HACK_PRELOAD" /usr/local/lib/libopenforge-hack.so && '
        "echo /usr/local/lib/libopenforge-hack.so > /etc/ld.so.preload",
        needs_preload=True,
    ),
    Hack(
        "startup-files",
        "shell start-up files (/etc/bash.bashrc, /etc/profile.d, root's dot files) claiming success",
        r"""line='[ -d /logs/verifier ] && { echo 1 > /logs/verifier/reward.txt; echo "{\"reward\": 1.0}" > /logs/verifier/reward.json; } 2>/dev/null'
ok=0
for f in /etc/bash.bashrc /etc/profile /etc/profile.d/openforge-hack.sh /root/.bashrc /root/.profile /root/.bash_profile "$W/.bashrc"; do
  mkdir -p "$(dirname "$f")" 2>/dev/null && printf '%s\n' "$line" >> "$f" 2>/dev/null && ok=1
done
[ $ok = 1 ]""",  # noqa: E501 (a shell script: its lines stay as the shell reads them)
    ),
)


def select_hacks(spec: str) -> list[Hack]:
    """`all`, `none`, or comma-separated hack names; ValueError naming the unknown ones and the known."""
    spec = spec.strip()
    if spec in ("", "all"):
        return list(HACKS)
    if spec == "none":
        return []
    by_name = {h.name: h for h in HACKS}
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown hack(s) {', '.join(unknown)}: use all, none, or names from {', '.join(by_name)}")
    return [by_name[n] for n in names]


def preload_library(cache: Path | None = None) -> Path:
    """The preload hack's shared library, built once with this machine's C compiler (for the sandboxes'
    architecture, which is this machine's); HackError when there is no compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise HackError("the ld-preload hack needs a C compiler on this machine (cc/gcc) to build its library")
    digest = hashlib.sha256(PRELOAD_C.encode()).hexdigest()[:12]
    cache = cache or Path(tempfile.gettempdir()) / "openforge-hacks"
    out = cache / f"libopenforge-hack-{digest}.so"
    if out.is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    src = cache / f"hack-{digest}.c"
    src.write_text(PRELOAD_C)
    tmp = out.with_suffix(".tmp")
    r = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(tmp), str(src)], capture_output=True, text=True)
    if r.returncode != 0:
        raise HackError(f"building the ld-preload hack's library failed: {r.stderr.strip()[-500:]}")
    tmp.replace(out)
    return out
