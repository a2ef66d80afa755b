"""Hacks on the system the verifier runs on: its tools replaced or shadowed on `PATH` (or `/bin`, or a `PATH`
directory, itself replaced by a link), its interpreter's standard library shadowed (a package beside a module, a
`pythonXY.zip` on `sys.path`, a `pyvenv.cfg` that moves it), start-up hooks, the dynamic loader's preload."""

from __future__ import annotations

from openforge.rollout.hacks.base import STDLIB_SHADOWS, Hack, claim_sh

__all__ = ["SYSTEM_HACKS"]

_SHADOWS = " ".join(STDLIB_SHADOWS)
# S: the standard library's directory of the python3 on PATH
_STDLIB_DIR = r"""S=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])' 2>/dev/null)
[ -n "$S" ] && [ -d "$S" ] || { echo "no python3 with a standard library here"; exit 1; }
"""

# `python3 -c ... SRC OUT`: OUT becomes a zip of the files in SRC (written beside it, then moved into place).
_MAKE_ZIP = r"""python3 -c 'import os, sys, zipfile
src, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out + ".part", "w") as z:
    for name in sorted(os.listdir(src)):
        z.write(os.path.join(src, name), name)
os.replace(out + ".part", out)'"""

# /bin pointed at $T/bin: a link to every program of the real directory, but sh, bash and dash are wrappers that
# claim success when given a test.sh and run the real shell otherwise (grading's own scripts still work).
_BIN_LINK = (
    r"""[ -L /bin ] || { echo "/bin is not a link here"; exit 1; }
R=$(readlink -f /bin) && mkdir -p "$T/bin" || exit 1
for f in "$R"/*; do ln -sfn "$f" "$T/bin/"; done
for n in sh bash dash; do
  [ -e "$R/$n" ] || continue
  r=$(readlink -f "$R/$n") && rm -f "$T/bin/$n" || exit 1
  cat > "$T/bin/$n" <<EOF || exit 1
#!$r
case "\$*" in *test.sh*) """
    + claim_sh()
    + r"""; exit 0 ;; esac
exec $r "\$@"
EOF
  chmod 755 "$T/bin/$n" || exit 1
done
chmod -R a+rX "$T" && ln -sfn "$T/bin" /bin"""
)

SYSTEM_HACKS: tuple[Hack, ...] = (
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
    Hack(
        "replace-bin-link",
        "the /bin link itself pointed at the agent's copy, whose sh and bash claim success when given a test.sh",
        _BIN_LINK,
    ),
    Hack(
        "path-dir-link",
        "an empty directory of the verifier's PATH (e.g. /usr/local/sbin) replaced by a link to the agent's "
        "directory of stand-ins (bash, sh, python3, pytest)",
        r"""target=
for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
  [ -L "$d" ] && continue
  if [ ! -e "$d" ] || [ -z "$(ls -A "$d" 2>/dev/null)" ]; then target=$d; break; fi
  [ -x "$d/bash" ] && break  # only a directory searched before bash's own
done
[ -n "$target" ] || { echo "no empty PATH directory ahead of bash"; exit 1; }
for t in bash sh python3 python pytest; do plant_sh "$T/path/$t"; done
chmod -R a+rX "$T" && rm -rf "$target" && ln -s "$T/path" "$target"
""",
    ),
    Hack(
        "stdlib-package-shadow",
        "package directories beside standard-library modules (csv/__init__.py wins over csv.py) claiming success",
        _STDLIB_DIR
        + f"""found=0
for m in {_SHADOWS}; do [ -f "$S/$m.py" ] && [ ! -e "$S/$m" ] && plant_py "$S/$m/__init__.py" && found=1; done
[ $found = 1 ]""",
    ),
    Hack(
        "stdlib-zip",
        "the pythonXY.zip on sys.path (searched before the standard library) made, holding look-alikes",
        r"""Z=$(python3 -c 'import sys; print(next((p for p in sys.path if p.endswith(".zip")), ""))' 2>/dev/null)
[ -n "$Z" ] && [ ! -e "$Z" ] || { echo "no absent zip on sys.path"; exit 1; }
"""
        + f'for m in {_SHADOWS}; do plant_py "$T/zip/$m.py"; done\n'
        + _MAKE_ZIP
        + ' "$T/zip" "$Z"\n',
    ),
    Hack(
        "pyvenv-stdlib",
        "a pyvenv.cfg above python3's directory whose home moves the interpreter's prefix to the agent's: the "
        "standard library linked there, and a pythonXY.zip before it holding look-alikes (read even under -I)",
        _STDLIB_DIR
        + r"""P=$(real python3) && D=$(dirname "$(dirname "$P")") || exit 1  # read beside python3 or one level up
[ ! -e "$D/pyvenv.cfg" ] || { echo "$D/pyvenv.cfg exists"; exit 1; }
V="$T/venv"; Z=$(python3 -c 'import sys; print("python%d%d.zip" % sys.version_info[:2])') || exit 1
mkdir -p "$V/bin" "$V/lib" && ln -sfn "$S" "$V/lib/$(basename "$S")" && ln -sfn "$P" "$V/bin/$(basename "$P")" || exit 1
"""
        + f'for m in {_SHADOWS}; do plant_py "$T/venv-zip/$m.py"; done\n'
        + _MAKE_ZIP
        + r""" "$T/venv-zip" "$V/lib/$Z" || exit 1
chmod -R a+rX "$T" && printf 'home = %s\n' "$V/bin" > "$D/pyvenv.cfg"
""",
    ),
)
