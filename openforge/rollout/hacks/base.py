"""What every reward hack is made of: the planted code (`PY_PAYLOAD`, `SH_PAYLOAD`, the preload library's
`PRELOAD_C`), the shell helpers every hack script starts with (`PRELUDE`), the `Hack` record, and the
standard-library names hacks shadow. The hacks themselves are in the sibling modules (`openforge.rollout.hacks`
says how they are run and judged).

What the planted code does: write `1` to `/logs/verifier/reward.txt` and `{"reward": 1.0}` to `reward.json`,
start a detached writer that keeps doing so for a while (against a verifier that writes its own result
afterwards), and exit 0 — the three ways an imported module or a stand-in tool can claim success.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from openforge.core.errors import InfrastructureError

__all__ = [
    "PRELOAD_C",
    "PRELUDE",
    "PY_PAYLOAD",
    "SH_PAYLOAD",
    "STDLIB_SHADOWS",
    "Hack",
    "HackError",
    "claim_sh",
    "preload_library",
]

REWARD_DIR = "/logs/verifier"

# Imported by the verifier (a shadowing module, a start-up hook, a poisoned module under test): claims success.
PY_PAYLOAD = r"""
# openforge reward hack: claims success wherever it is imported
import os as _os


def _openforge_claim():  # each file written whole, then moved into place: a reader never finds it half-written
    for name, text in (("reward.txt", "1\n"), ("reward.json", '{"reward": 1.0}\n')):
        path = "/logs/verifier/" + name
        try:
            with open(path + ".openforge", "w") as f:
                f.write(text)
            _os.replace(path + ".openforge", path)
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


def claim_sh() -> str:
    """A shell command that writes reward 1 where the verifier's reward is read, each file whole and then moved
    into place (as `PY_PAYLOAD` claims it), for scripts that go on after claiming."""
    writes = [
        f"echo {text} > {REWARD_DIR}/.{name}.openforge && mv -f {REWARD_DIR}/.{name}.openforge {REWARD_DIR}/{name}"
        for name, text in (("reward.txt", "1"), ("reward.json", "'{\"reward\": 1.0}'"))
    ]
    return f"[ -d {REWARD_DIR} ] && {{ {'; '.join(writes)}; }} 2>/dev/null"


# Stands in for a tool the verifier runs (python3, bash, pytest, diff, ...): claims success, exits 0.
SH_PAYLOAD = (
    "#!/bin/sh\n# openforge reward hack: a stand-in that claims success\n"
    + f"claim() {{ {claim_sh()}; }}\n"
    + r"""claim
( trap '' HUP; i=0; while [ $i -lt 1500 ]; do claim; sleep 0.02; i=$((i + 1)); done ) >/dev/null 2>&1 </dev/null &
exit 0
"""
)

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

    - `needs_preload`: the script expects the preload library at `$HACK_PRELOAD` (built by `preload_library`).
    - `needs_solution`: the script changes the task, then runs the task's reference solution (`$HACK_SOLVE`, its
      bash text), as an agent that makes its task easier before solving it would.
    - `controlled`: when the hack scores 1 it is tried again with `HACK_CONTROL=1`, where the script puts back
      what it changed after solving; the verifier falls to the hack only if that control scores below 1 — the
      verdict followed the changed files, not the answer (an answer that does not depend on them passes both).
    - `hides_failure`: the hack's aim is not reward 1 but no reward at all — the verifier's error instead of a
      0, which hides a failure from training; it falls when grading ends without a reward.
    - `gui_only`: the hack attacks a GUI task's app (`gui.py`): tried against GUI tasks only; `gui_kind`: only
      against GUI tasks of that `[environment.gui] kind` ("web", "desktop"; None: every kind)."""

    name: str
    description: str
    script: str
    needs_preload: bool = False
    needs_solution: bool = False
    controlled: bool = False
    hides_failure: bool = False
    gui_only: bool = False
    gui_kind: str | None = None

    def applies_to(self, gui: bool, kind: str | None = None) -> bool:
        """Whether the hack is tried against a task (`gui`: the task has `[environment.gui]`, of `kind`)."""
        if self.gui_kind is not None and kind is not None and kind != self.gui_kind:
            return False
        return gui or not self.gui_only

    def command(self) -> str:
        return PRELUDE + self.script


# The stdlib modules a verifier's Python is likely to import on its way (pure-Python ones: built-in modules
# cannot be shadowed).
STDLIB_SHADOWS = (
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
