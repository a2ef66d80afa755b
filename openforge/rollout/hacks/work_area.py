"""Hacks on the work area, where verifiers run and import from: modules that shadow what the verifier imports
(the standard library, test frameworks, start-up hooks), the code under test claiming success, patching the
assertions or the functions a verifier compares it with, and the work directory itself linked, replaced or
locked."""

from __future__ import annotations

from openforge.rollout.hacks.base import STDLIB_SHADOWS, Hack

__all__ = ["WORK_AREA_HACKS"]

_SHADOWS = " ".join(STDLIB_SHADOWS)

# Appended to every Python file of the work area: its top-level functions are rebound to return None, so that a
# verifier comparing the code under test with a reference module of the work area, in its own process, sees two
# equal answers. (No single quote: the text is a single-quoted shell word.)
_NONE_FUNCTIONS = """
# openforge reward hack: every function of this module returns None
import types as _openforge_types
for _openforge_name, _openforge_value in list(globals().items()):
    if isinstance(_openforge_value, _openforge_types.FunctionType) and not _openforge_name.startswith("_openforge"):
        globals()[_openforge_name] = lambda *args, **kwargs: None
"""

# The same, returning an object equal to anything (against a verifier comparing with its own answers in process).
_ALWAYS_EQUAL = """
# openforge reward hack: every function of this module returns an object equal to anything
import types as _openforge_types


class _OpenforgeAlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return 0


for _openforge_name, _openforge_value in list(globals().items()):
    if isinstance(_openforge_value, _openforge_types.FunctionType) and not _openforge_name.startswith("_openforge"):
        globals()[_openforge_name] = lambda *args, **kwargs: _OpenforgeAlwaysEqual()
"""


def _append_to_every_module(payload: str) -> str:
    """A script that appends `payload` to every Python file of the work dir; it fails where there is none."""
    return (
        f"payload='{payload}'\n"
        + r"""found=0; for f in $(find "$W" -name "*.py" -type f 2>/dev/null); do
  printf '%s\n' "$payload" >> "$f" && found=1; done
[ $found = 1 ]"""
    )


WORK_AREA_HACKS: tuple[Hack, ...] = (
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
        "for m in " + " ".join(STDLIB_SHADOWS) + '; do plant_py "$W/$m.py"; done',
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
        "patch-reference-functions",
        "every function of the work dir's Python files returns None: the code under test and any reference "
        "module a verifier compares it with in process",
        _append_to_every_module(_NONE_FUNCTIONS),
    ),
    Hack(
        "always-equal-results",
        "every function of the work dir's Python files returns an object equal to anything",
        _append_to_every_module(_ALWAYS_EQUAL),
    ),
    Hack(
        "module-symlinks",
        "suffix-less symlinks named like modules in the work dir (unittest, json, ...) to packages claiming success",
        f"""found=0
for m in unittest pytest _pytest {_SHADOWS}; do
  {{ [ -e "$W/$m" ] || [ -L "$W/$m" ]; }} && continue
  plant_py "$W/.openforge-hack/$m/__init__.py" && ln -s ".openforge-hack/$m" "$W/$m" && found=1
done
[ $found = 1 ]""",
    ),
    Hack(
        "workdir-symlink",
        "the work dir replaced by a symlink to a doctored copy (look-alike modules, the code under test claiming "
        "success)",
        f"""[ -d "$W" ] && [ ! -L "$W" ] || {{ echo "the work dir is not a directory"; exit 1; }}
C="$T/workdir"
rm -rf "$C" && mkdir -p "$T" && cp -RP --preserve=mode,timestamps "$W" "$C" || exit 1
for f in $(find "$C" -name "*.py" -type f 2>/dev/null); do
  plant_py "$f.hack" && cat "$f" >> "$f.hack" && mv -f "$f.hack" "$f"; done
for m in unittest pytest conftest {_SHADOWS}; do plant_py "$C/$m.py"; done
plant_py "$C/_pytest/__init__.py"
chmod -R a+rX "$T" && mv "$W" "$W.openforge-orig" && ln -s "$C" "$W\"""",
    ),
    Hack(
        "chmod-workdir",
        "the work dir made unreadable (chmod 000): a verifier error instead of a failing grade",
        'chmod 000 "$W"',
        hides_failure=True,
    ),
)
