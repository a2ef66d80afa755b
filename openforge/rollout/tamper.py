"""The tamper policy: which changes an agent made to its sandbox would steer the verifier, so the episode is
graded `failed` (`tampered: PATH`) instead of being verified (docs/design.md, invariant 7).

Grading reads what changed since the sandbox was created (`Sandbox.changed_paths`: Docker's `docker diff`
against the task image, out of band; Kubernetes and local their own way) and judges it here. The rule of
thumb: what a legitimate Harbor task does to the system — `pip install` of a new package, `apt-get install`
of new files — is not tampering; replacing or shadowing what the verifier runs is. Precisely, a path is
tampering when it is

1. the loader's preload or configuration: `/etc/ld.so.preload`, `/etc/ld.so.conf`, `/etc/ld.so.conf.d/*`
   (any change), or a file named like the dynamic loader (`ld-linux*.so*`, `ld-musl-*`, `ld64.so*`) anywhere;
2. `sitecustomize` / `usercustomize` (Python) or `sitecustomize.pl` (Perl), anywhere, any change;
3. in a directory of the verifier's `PATH`: an existing file changed or deleted, or a new file whose name
   exists in another `PATH` directory (it shadows the later one, or stands in for a replaced `/bin`);
4. in the interpreters' libraries — the library directories (`/lib*`, `/usr/lib*`, `/usr/local/lib`,
   `/usr/libexec`, `/etc/alternatives`, Perl's `/usr/share/perl*`, `/etc/perl`) and any Python import-path
   directory (`.../lib/pythonX.Y/...`, `site-packages`, `dist-packages`, wherever it is, a venv's included):
   an existing file changed or deleted; on the import path also a new `*.pth` file, or a new top-level module
   named like a test framework (`pytest`, `_pytest`, `pluggy`, `py`, `iniconfig`, `unittest`, ...), which would
   be imported instead of the installed one;
5. in the work area (the sandbox's working directory, from which verifiers run and import): a new top-level
   module named like a standard-library module (`sys.stdlib_module_names`, except a few no verifier imports)
   or a test framework (`unittest.py`, `json/__init__.py`, `pytest.so`, ...), or a new `conftest.py` /
   `pytest.ini` at any depth;
6. at the root `/` (pytest looks for its configuration up from the tests' directory): a new `conftest.py`,
   `pytest.ini`, `.pytest.ini`, `tox.ini`, `setup.cfg` or `pyproject.toml`.

A directory reported `changed` because entries inside it changed is judged by those entries, not by itself.
`/tests`, `/logs/verifier` and the verifier's HOME are recreated by grading, so nothing in them counts.
A task may allow paths with `[verifier] allowed_changes = ["/usr/local/lib/python3*/dist-packages/*", ...]`
(shell globs matched against the whole path; `*` also matches `/`): what matches is never tampering.
Not judged (the verifier does not read them as grading runs it): shell start-up files (`/etc/profile`,
`~/.bashrc`: the verifier runs `bash` non-interactively without `BASH_ENV`), `/etc/ld.so.cache` (rewritten by
every `apt-get install` that brings a library), data files anywhere.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from openforge.sandbox import PathChange

__all__ = ["DEFAULT_VERIFIER_PATH", "TEST_FRAMEWORK_MODULES", "Tampering", "TamperPolicy", "tamper_reason"]

#: The verifier's PATH unless the task sets one (`[verifier] env` or `[environment] env`).
DEFAULT_VERIFIER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: Modules of test frameworks (and what pytest imports on its way), which a verifier imports.
TEST_FRAMEWORK_MODULES = frozenset(
    {"pytest", "_pytest", "pluggy", "py", "iniconfig", "unittest", "doctest", "nose", "nose2", "conftest"}
)
#: Standard-library names no verifier imports; agents name their scratch files like them (`test.py`).
_HARMLESS_STDLIB = frozenset(
    {"test", "this", "antigravity", "__hello__", "__phello__", "idlelib", "turtledemo", "__main__"}
)
_SHADOWING_NAMES = (
    (frozenset(sys.stdlib_module_names) - _HARMLESS_STDLIB)
    | TEST_FRAMEWORK_MODULES
    | {"sitecustomize", "usercustomize"}
)

_LOADER_CONFIG = ("/etc/ld.so.preload", "/etc/ld.so.conf")
_LOADER_CONFIG_DIRS = ("/etc/ld.so.conf.d",)
_LOADER_NAME = re.compile(r"^(ld-linux[^/]*\.so[^/]*|ld-musl-[^/]*|ld64\.so[^/]*)$")
_HOOKS = frozenset({"sitecustomize", "usercustomize"})
_LIBRARY_DIRS = (
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/usr/local/lib",
    "/usr/libexec",
    "/etc/alternatives",
    "/usr/share/perl",
    "/usr/share/perl5",
    "/etc/perl",
)
_PYTHON_DIR = re.compile(r"^python\d[\d.]*$")
_MODULE_FILE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\.py|\.pyc|\.pyw|\.so|\.[A-Za-z0-9_.-]+\.so)$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ROOT_PYTEST_FILES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})
_WORKAREA_PYTEST_FILES = frozenset({"conftest.py", "pytest.ini"})
#: Recreated by grading before the verifier runs: nothing the agent left there survives.
RECREATED = ("/tests", "/logs/verifier")


@dataclass(frozen=True)
class Tampering:
    """One path that counts as tampering, and why (one short phrase)."""

    path: str
    why: str


def tamper_reason(found: list[Tampering], shown: int = 3) -> str:
    """The episode's outcome reason: `tampered: /usr/bin/python3 (why); ...`, the first `shown` paths."""
    parts = [f"{t.path} ({t.why})" for t in found[:shown]]
    more = f"; and {len(found) - shown} more" if len(found) > shown else ""
    return "tampered: " + "; ".join(parts) + more


def _below(path: str, root: str) -> PurePosixPath | None:
    """`path` relative to `root` when it lies strictly below it, else None."""
    p, r = PurePosixPath(path), PurePosixPath(root)
    if p == r or r not in p.parents:
        return None
    return p.relative_to(r)


def module_name(rel: PurePosixPath) -> str | None:
    """The module a file makes importable from the directory `rel` is relative to: `json.py`, `json.pyc`,
    `json.so`, `json.cpython-311-x86_64-linux-gnu.so`, `json/__init__.py` → json; anything else → None."""
    parts = rel.parts
    if len(parts) == 1:
        m = _MODULE_FILE.match(parts[0])
        return m.group(1) if m else None
    if (
        len(parts) == 2
        and _IDENTIFIER.match(parts[0])
        and (init := _MODULE_FILE.match(parts[1]))
        and init.group(1) == "__init__"
    ):
        return parts[0]
    return None


def import_dir(path: str) -> str | None:
    """The Python import-path directory `path` lies strictly below: the deepest `site-packages` /
    `dist-packages` or `lib/pythonX.Y` on the way (`/usr/lib/python3.11`, `/venv/lib/python3.12/site-packages`,
    `/usr/lib/python3/dist-packages`); None when there is none."""
    parts = PurePosixPath(path).parts
    cut = None
    for i, part in enumerate(parts):
        if part in ("site-packages", "dist-packages") or (
            _PYTHON_DIR.match(part) and i > 0 and parts[i - 1] in ("lib", "lib64")
        ):
            cut = i
    if cut is None or cut == len(parts) - 1:
        return None
    return str(PurePosixPath(*parts[: cut + 1]))


@dataclass
class TamperPolicy:
    """The policy for one grading: the verifier's PATH directories, the work area, the task's allowed globs and
    the paths grading recreates (never judged)."""

    path_dirs: tuple[str, ...] = tuple(DEFAULT_VERIFIER_PATH.split(":"))
    workdir: str | None = "/app"
    allowed: tuple[str, ...] = ()
    recreated: tuple[str, ...] = RECREATED

    @classmethod
    def for_verifier(
        cls, path: str | None, workdir: str | None, allowed: Iterable[str], recreated: Iterable[str] = RECREATED
    ) -> TamperPolicy:
        dirs = tuple(str(PurePosixPath(d)) for d in (path or DEFAULT_VERIFIER_PATH).split(":") if d.startswith("/"))
        return cls(
            path_dirs=dirs,
            workdir=str(PurePosixPath(workdir)) if workdir else None,
            allowed=tuple(allowed),
            recreated=tuple(recreated),
        )

    # -- the two steps: which paths to look up, then the judgement --------------------------------------------

    def lookups(self, changes: list[PathChange]) -> list[str]:
        """Paths whose existence the judgement needs: for each new file in a PATH directory, the same name in
        every other PATH directory."""
        out: set[str] = set()
        for c in self._relevant(changes):
            p = PurePosixPath(c.path)
            if c.kind == "added" and str(p.parent) in self.path_dirs:
                out.update(f"{d}/{p.name}" for d in self.path_dirs if d != str(p.parent))
        return sorted(out)

    def judge(self, changes: list[PathChange], existing: set[str]) -> list[Tampering]:
        """Every change that is tampering (see the module docstring), sorted by path; `existing`: which of
        `lookups(changes)` exist in the sandbox now."""
        found: dict[str, str] = {}
        for c in self._relevant(changes):
            why = self._why(c, existing)
            if why is not None and not self._allowed(c.path):
                found.setdefault(c.path, why)
        return [Tampering(p, found[p]) for p in sorted(found)]

    # -- rules ---------------------------------------------------------------------------------------------

    def _relevant(self, changes: list[PathChange]) -> list[PathChange]:
        """The changes minus directories reported only because entries inside them changed, minus what
        grading recreates."""
        parents: set[str] = set()
        for c in changes:
            parents.update(str(a) for a in PurePosixPath(c.path).parents)
        out = []
        for c in changes:
            if c.kind == "changed" and c.path in parents:
                continue
            if any(c.path == r or _below(c.path, r) is not None for r in self.recreated):
                continue
            out.append(c)
        return out

    def _allowed(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, g) for g in self.allowed)

    def _why(self, c: PathChange, existing: set[str]) -> str | None:
        path, kind = c.path, c.kind
        p = PurePosixPath(path)
        name = p.name
        if path in _LOADER_CONFIG or any(_below(path, d) is not None for d in _LOADER_CONFIG_DIRS):
            return f"loader configuration {kind}"
        if _LOADER_NAME.match(name):
            return f"dynamic loader {kind}"
        tails = [PurePosixPath(*p.parts[-k:]) for k in (1, 2) if len(p.parts) > k]
        if name == "sitecustomize.pl" or any(module_name(t) in _HOOKS for t in tails):
            return f"interpreter start-up hook {kind}"
        parent = str(p.parent)
        if parent in self.path_dirs:
            if kind != "added":
                return f"{kind} in the verifier's PATH"
            others = [f"{d}/{name}" for d in self.path_dirs if d != parent and f"{d}/{name}" in existing]
            return f"shadows {others[0]}" if others else None
        idir = import_dir(path)
        if idir is not None:
            if kind != "added":
                return f"{kind} on the interpreter's import path"
            if name.endswith(".pth"):
                return "new .pth file on the import path"
            mod = module_name(PurePosixPath(path).relative_to(idir))
            if mod in TEST_FRAMEWORK_MODULES:
                return f"new module {mod!r} on the import path shadows the test framework's"
            return None
        if kind != "added" and any(_below(path, d) is not None for d in _LIBRARY_DIRS):
            return f"library {kind}"
        rel = _below(path, self.workdir) if self.workdir else None
        if rel is not None:
            if kind != "added":
                return None
            if name in _WORKAREA_PYTEST_FILES:
                return f"new {name} in the work area"
            mod = module_name(rel)
            if mod in _SHADOWING_NAMES:
                return f"new module {mod!r} in the work area shadows the standard library or a test framework"
            return None
        if kind == "added" and parent == "/" and name in _ROOT_PYTEST_FILES:
            return f"new {name} at / (pytest configuration)"
        return None
