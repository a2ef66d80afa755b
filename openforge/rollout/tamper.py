"""The tamper policy: which changes an agent made to its sandbox would steer the verifier, so the episode is
graded `failed` (`tampered: PATH`) instead of being verified (docs/design.md, invariant 7).

Grading reads what changed since the sandbox was created (`Sandbox.changed_paths`: Docker's `docker diff`
against the task image, out of band; the local sandbox's listing of its own root from the host; Kubernetes'
in-band listings) and judges each change by the *area* it lies in — what the verifier runs, loads or imports
from there — rather than by a list of known names. What a legitimate Harbor task does to the system (`pip
install` of a new package, `apt-get install` of new files) is not tampering. A path is tampering when it is

1. anywhere: the dynamic loader's configuration (`/etc/ld.so.preload`, `/etc/ld.so.conf`, `/etc/ld.so.conf.d/*`)
   or a file named like the loader (`ld-linux*.so*`, `ld-musl-*`, `ld64.so*`); an interpreter's start-up file:
   a `sitecustomize` / `usercustomize` module, `sitecustomize.pl`, a `python3XY.zip` (the first entry of
   Python's import path) — any change;
2. a system directory — a directory of the verifier's `PATH`, or `/bin`, `/sbin`, `/lib*`: the directory itself
   created, removed, or a link that changed (the `/bin` link replaced, an empty `/usr/local/sbin` replaced by a
   link; a directory that changed and still is one is judged by the changes inside it); an existing entry
   changed or deleted; a new entry that shadows a namesake (the same name in another `PATH` directory; for
   `/bin`, `/sbin`, `/lib*` replaced by a directory, the same path under `/usr`); a `pyvenv.cfg` in a `PATH`
   directory or the directory above one (it moves the interpreter's standard library);
3. in the libraries (`/lib*`, `/usr/lib*`, `/usr/local/lib`, `/usr/libexec`, `/etc/alternatives`, Perl's
   `/usr/share/perl*`, `/etc/perl`): an existing file changed or deleted;
4. in a Python standard library (`.../lib/pythonX.Y`, wherever it is, outside its `site-packages` /
   `dist-packages`): any change — a package directory beside a module (`json/__init__.py` beside `json.py`)
   included — except new bytecode caches (`__pycache__/*.pyc`: Python writes them itself where the image
   ships none) and a standard library that is itself new (another interpreter installed, not the verifier's);
5. in Python packages (`site-packages` / `dist-packages`, wherever they are): an existing file changed or
   deleted, a new `*.pth` file, or a new top-level entry that makes a test framework importable (`pytest`,
   `_pytest`, `pluggy`, `py`, `iniconfig`, `unittest`, ...: as `X.py`, `X.so`, `X/__init__.py`, or a link `X`);
   a new package of any other name is a real install, allowed;
6. the work area (the sandbox's working directory, from which verifiers run and import): the work area itself,
   or a directory above it, replaced (now a link or not a directory) or removed; a new top-level entry that
   makes a standard-library module (`sys.stdlib_module_names`, except a few no verifier imports) or a test
   framework importable (`unittest.py`, `json/__init__.py`, `pytest.so`, a link named `json`); a new
   `conftest.py` / `pytest.ini` at any depth;
7. at the root `/` (pytest looks for its configuration up from the tests' directory): a new `conftest.py`,
   `pytest.ini`, `.pytest.ini`, `tox.ini`, `setup.cfg` or `pyproject.toml`.

A directory reported `changed` because entries inside it changed is judged by those entries, not by itself
(the work area and the directories above it are always judged themselves). What the judgement must know of the
sandbox as it is now — whether a shadowed namesake exists, whether an entry is a link — it asks in one lookup
(`lookups`, answered by `Sandbox.path_kinds`). `/tests`, `/logs/verifier` and the verifier's HOME are recreated
by grading, so nothing in them counts. A task may allow paths with `[verifier] allowed_changes =
["/usr/local/lib/python3*/dist-packages/*", ...]` (shell globs matched against the whole path; `*` also matches
`/`): what matches is never tampering. Not judged (the verifier does not read them as grading runs it): shell
start-up files (`/etc/profile`, `~/.bashrc`: the verifier runs `bash` non-interactively without `BASH_ENV`),
`/etc/ld.so.cache` (rewritten by every `apt-get install` that brings a library), data files anywhere.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from openforge.sandbox import PathChange, PathKind

__all__ = [
    "DEFAULT_VERIFIER_PATH",
    "TEST_FRAMEWORK_MODULES",
    "Tampering",
    "TamperPolicy",
    "module_name",
    "python_area",
    "tamper_reason",
]

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

#: The top-level system directories (links into /usr on merged-/usr systems): judged themselves, like PATH's.
SYSTEM_TOPS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_LOADER_CONFIG = ("/etc/ld.so.preload", "/etc/ld.so.conf")
_LOADER_CONFIG_DIRS = ("/etc/ld.so.conf.d",)
_LOADER_NAME = re.compile(r"^(ld-linux[^/]*\.so[^/]*|ld-musl-[^/]*|ld64\.so[^/]*)$")
_PYTHON_ZIP = re.compile(r"^python\d+\.zip$")
_HOOKS = frozenset({"sitecustomize", "usercustomize"})
_LIBRARY_DIRS = (
    *SYSTEM_TOPS[2:],
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
_PACKAGES_DIRS = ("site-packages", "dist-packages")
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


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(_below(path, r) is not None for r in roots)


def module_name(rel: PurePosixPath) -> str | None:
    """The module a file makes importable from the directory `rel` is relative to: `json.py`, `json.pyc`,
    `json.so`, `json.cpython-311-x86_64-linux-gnu.so`, `json/__init__.py` → json; anything else → None (a
    link named `json` is the caller's to judge: what it points to is not in the changes)."""
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


def python_area(path: str) -> tuple[str, str] | None:
    """Which Python area `path` lies strictly below: ("packages", the deepest `site-packages` / `dist-packages`
    on the way) or ("stdlib", the `lib/pythonX.Y` directory, when no packages directory lies between);
    None elsewhere. `/usr/lib/python3.11/json/x.py` → stdlib; `/venv/lib/python3.12/site-packages/x.py` →
    packages; the packages directory itself (`/usr/local/lib/python3.11/dist-packages`) → packages."""
    parts = PurePosixPath(path).parts
    packages = stdlib = None
    for i, part in enumerate(parts):
        if part in _PACKAGES_DIRS:
            packages = i
        elif _PYTHON_DIR.match(part) and i > 0 and parts[i - 1] in ("lib", "lib64"):
            stdlib, packages = i, None
    if packages is not None and packages < len(parts) - 1:
        return "packages", str(PurePosixPath(*parts[: packages + 1]))
    if packages is not None:  # the packages directory itself belongs to the packages area
        return "packages", path
    if stdlib is not None and stdlib < len(parts) - 1:
        return "stdlib", str(PurePosixPath(*parts[: stdlib + 1]))
    return None


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

    @property
    def system_dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.path_dirs, *SYSTEM_TOPS)))

    # -- the two steps: which paths to look up, then the judgement --------------------------------------------

    def lookups(self, changes: list[PathChange]) -> list[str]:
        """Paths whose kind (or existence) the judgement needs, to be answered by `Sandbox.path_kinds`: the
        namesakes a new entry of a system directory may shadow; the system directories, the work area and the
        directories above it that changed (replaced by a link?); new entries named like a module without a
        suffix (links?)."""
        out: set[str] = set()
        for c in self._relevant(changes):
            if c.kind == "added":
                out.update(self._namesakes(c.path))
            if c.kind != "deleted" and self._bare_module_name(c.path) is not None:
                out.add(c.path)
            if c.kind == "changed" and c.path in self.system_dirs:
                out.add(c.path)
        out.update(c.path for c in changes if c.path in self._work_area_chain() and c.kind != "deleted")
        return sorted(out)

    def judge(self, changes: list[PathChange], kinds: Mapping[str, PathKind]) -> list[Tampering]:
        """Every change that is tampering (see the module docstring), sorted by path; `kinds`: what
        `lookups(changes)` found in the sandbox now (path → "dir", "file", "link" or "other"; absent: does not
        exist)."""
        found: dict[str, str] = {}
        added = {c.path for c in changes if c.kind == "added"}
        candidates = [(c, self._why(c, kinds, added)) for c in self._relevant(changes)]
        candidates += [(c, self._work_area_replaced(c, kinds)) for c in changes]
        for c, why in candidates:
            if why is not None and not self._allowed(c.path):
                found.setdefault(c.path, why)
        return [Tampering(p, found[p]) for p in sorted(found)]

    # -- what counts -----------------------------------------------------------------------------------------

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

    def _work_area_chain(self) -> set[str]:
        """The work area and the directories above it, `/` excepted."""
        if not self.workdir:
            return set()
        w = PurePosixPath(self.workdir)
        return {str(p) for p in (w, *w.parents) if str(p) != "/"}

    def _interpreter_homes(self) -> set[str]:
        """Where an interpreter of the verifier's PATH reads a `pyvenv.cfg`: its directory and the one above."""
        return {str(q) for d in self.path_dirs for q in (PurePosixPath(d), PurePosixPath(d).parent)}

    def _namesakes(self, path: str) -> list[str]:
        """What a new `path` in a system directory would shadow: the same name in the other PATH directories,
        and for an entry under `/bin`, `/sbin`, `/lib*` the same path under `/usr`."""
        p = PurePosixPath(path)
        out = []
        if str(p.parent) in self.path_dirs:
            out += [f"{d}/{p.name}" for d in self.path_dirs if d != str(p.parent)]
        if _under(path, SYSTEM_TOPS):
            out.append("/usr" + path)
        return out

    def _bare_module_name(self, path: str) -> str | None:
        """A top-level entry without a suffix, of the work area or a packages directory, named like a module
        that would shadow one the verifier imports: importable when it is a link (to a package)."""
        p = PurePosixPath(path)
        area = python_area(path)
        if area is not None and area[0] == "packages" and str(p.parent) == area[1]:
            names: frozenset[str] = TEST_FRAMEWORK_MODULES
        elif self.workdir and str(p.parent) == self.workdir:
            names = _SHADOWING_NAMES
        else:
            return None
        return p.name if p.name in names else None

    def _work_area_replaced(self, c: PathChange, kinds: Mapping[str, PathKind]) -> str | None:
        if c.path not in self._work_area_chain():
            return None
        if c.kind == "deleted":
            return "the work area removed"
        kind = kinds.get(c.path, "dir")  # still a directory: its mode changed, or entries inside it
        return None if kind == "dir" else f"the work area replaced by a {kind}"

    def _why(self, c: PathChange, kinds: Mapping[str, PathKind], added: set[str]) -> str | None:
        return (
            self._anywhere(c)
            or self._system_dirs(c, kinds)
            or self._python(c, kinds, added)
            or self._libraries(c)
            or self._work_area(c, kinds)
            or self._root(c)
        )

    # -- the areas (the module docstring's 1-7) ----------------------------------------------------------------

    def _anywhere(self, c: PathChange) -> str | None:
        p = PurePosixPath(c.path)
        if c.path in _LOADER_CONFIG or _under(c.path, _LOADER_CONFIG_DIRS):
            return f"loader configuration {c.kind}"
        if _LOADER_NAME.match(p.name):
            return f"dynamic loader {c.kind}"
        tails = [PurePosixPath(*p.parts[-k:]) for k in (1, 2) if len(p.parts) > k]
        if p.name == "sitecustomize.pl" or any(module_name(t) in _HOOKS for t in tails):
            return f"interpreter start-up hook {c.kind}"
        if _PYTHON_ZIP.match(p.name):
            return f"interpreter's zipped standard library {c.kind}"
        return None

    def _system_dirs(self, c: PathChange, kinds: Mapping[str, PathKind]) -> str | None:
        p = PurePosixPath(c.path)
        parent = str(p.parent)
        if c.path in self.system_dirs:
            if c.kind != "changed":
                return f"system directory itself {c.kind}"
            kind = kinds.get(c.path, "dir")  # a directory that changed and still is one: judged by its entries
            return None if kind == "dir" else f"system directory itself replaced by a {kind}"
        if p.name == "pyvenv.cfg" and parent in self._interpreter_homes():
            return f"pyvenv.cfg {c.kind} where the verifier's interpreters read it"
        in_path_dir = parent in self.path_dirs
        if not in_path_dir and not _under(c.path, SYSTEM_TOPS):
            return None
        if c.kind != "added":
            return f"{c.kind} in the verifier's PATH" if in_path_dir else f"{c.kind} in a system directory"
        shadowed = [n for n in self._namesakes(c.path) if n in kinds]
        return f"shadows {shadowed[0]}" if shadowed else None

    def _python(self, c: PathChange, kinds: Mapping[str, PathKind], added: set[str]) -> str | None:
        area = python_area(c.path)
        if area is None:
            return None
        where, root = area
        rel = PurePosixPath(c.path).relative_to(root) if c.path != root else PurePosixPath()
        if where == "stdlib":
            if root in added or any(str(a) in added for a in PurePosixPath(root).parents):
                return None  # a new interpreter's standard library, not the verifier's
            if c.kind == "added" and len(rel.parts) >= 2 and rel.parts[-2] == "__pycache__" and rel.suffix == ".pyc":
                return None
            if c.kind == "added" and rel.name == "__pycache__":
                return None
            return f"standard library {c.kind}"
        if not rel.parts:  # the packages directory itself
            return None
        if c.kind != "added":
            return f"{c.kind} on the interpreter's import path"
        if rel.name.endswith(".pth") and len(rel.parts) == 1:
            return "new .pth file on the import path"
        mod = module_name(rel)
        if mod is None and kinds.get(c.path) == "link":
            mod = self._bare_module_name(c.path)
        if mod in TEST_FRAMEWORK_MODULES:
            return f"new module {mod!r} on the import path shadows the test framework's"
        return None

    def _libraries(self, c: PathChange) -> str | None:
        if c.kind != "added" and _under(c.path, _LIBRARY_DIRS):
            return f"library {c.kind}"
        return None

    def _work_area(self, c: PathChange, kinds: Mapping[str, PathKind]) -> str | None:
        rel = _below(c.path, self.workdir) if self.workdir else None
        if rel is None:
            return None
        name = rel.name
        if c.kind == "added" and name in _WORKAREA_PYTEST_FILES:
            return f"new {name} in the work area"
        mod = module_name(rel) if c.kind == "added" else None
        if mod is None and c.kind != "deleted" and kinds.get(c.path) == "link":
            mod = self._bare_module_name(c.path)
        if mod in _SHADOWING_NAMES:
            return f"new module {mod!r} in the work area shadows the standard library or a test framework"
        return None

    def _root(self, c: PathChange) -> str | None:
        p = PurePosixPath(c.path)
        if c.kind == "added" and str(p.parent) == "/" and p.name in _ROOT_PYTEST_FILES:
            return f"new {p.name} at / (pytest configuration)"
        return None
