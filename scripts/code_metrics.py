"""Count what issue 24 ("one way to say each thing") sets out to reduce, in a checkout of OpenForge.

    python scripts/code_metrics.py [PATH] [--json FILE]

PATH: the checkout (default: this one); to measure a commit, `git worktree add /tmp/c COMMIT` (or
`git archive COMMIT | tar -x -C /tmp/c`) and pass /tmp/c. Prints a table; --json writes the counts and what
was counted (paths relative to the checkout). Reads the code with `ast` only: nothing is imported or run.

What is counted, exactly:

episode configs
    Pydantic models (classes deriving from pydantic's BaseModel, directly or through another model of the
    package) that declare, in their own body, at least EPISODE_MIN of the EPISODE_FIELDS names: the settings
    that say where and how an episode runs. `episode_field_repeats` counts, over those names, the declarations
    beyond the first (a name declared by three models counts 2).

final-episode definitions
    Places that decide from the `final` flag of an episode's metadata whether an episode counts: a read of the
    key "final" (`x.get("final"...)`, `x["final"]`, `"final" in x`) that sits in a decision (the test of an
    if / while / conditional expression, a comprehension's filter, or a function's return value), and every
    string constant that reads it in SQL (`'$.final'`). Reads that only copy the flag (an export) and writes
    do not count. One definition per enclosing top-level function, method or module-level constant: code that
    calls a shared definition adds none.

Any in signatures
    Occurrences of the name `Any` (or `typing.Any`) in the parameter and return annotations of every function
    and method (nested ones included). Aliases that hide an `Any` (`JSON = dict[str, Any]`) are not followed.
    Cross-room: the same, restricted to the APIs other rooms use: every name a module imports from a module of
    another room (`openforge/<room>/...`; cli.py and config.py are rooms of their own), and every attribute it
    reads on another room's module it imported, resolved through re-exports to its definition. A function
    counts its own signature; a class counts the signatures of its public methods (no leading `_`) and of
    `__init__` / `__call__`.

exceptions
    Public classes (no leading `_`) deriving from BaseException, the package's classes followed through their
    bases. A class's root is the topmost class of the package in its ancestry (one whose bases are all outside
    the package); `exception_roots` counts distinct roots: 1 means one tree. `outside_bases` are the distinct
    bases outside the package the roots derive from (RuntimeError, ValueError, ...).

cli and module size
    Lines of openforge/cli.py (or the files of an openforge/cli/ package: total and largest), imports inside its
    functions; every module of openforge/ over MAX_LINES lines; definitions (functions or methods) of each name
    in DUPLICATE_NAMES (one implementation of each idea: 1 each).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import datetime
import json
import os
import platform
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from package_imports import Module, Package, absolute, attributes_used, load_package, module_aliases, room_of

EPISODE_FIELDS = frozenset(
    {
        "harness",
        "harnesses",
        "eval_harnesses",
        "harness_options",
        "harness_bundle",
        "sandbox",
        "sandbox_options",
        "image_map",
        "agent_user",
        "agent_timeout_s",
        "max_attempts",
        "max_new_tokens",
        "temperature",
        "faults",
        "proxy_listen",
        "proxy_options",
    }
)
EPISODE_MIN = 3
MAX_LINES = 500
DUPLICATE_NAMES = ("find_stores", "pass_at_1")
PUBLIC_DUNDERS = ("__init__", "__call__")


# ---- episode configs


def _base_names(cls: ast.ClassDef) -> list[str]:
    return [ast.unparse(b).rsplit(".", 1)[-1] for b in cls.bases]


def _classes(package: Package) -> list[tuple[Module, ast.ClassDef]]:
    return [(m, n) for m in package.modules.values() for n in ast.walk(m.tree) if isinstance(n, ast.ClassDef)]


def pydantic_models(package: Package) -> list[tuple[Module, ast.ClassDef]]:
    classes = _classes(package)
    names = {"BaseModel"}
    while True:  # models of models (ProxyConfig(ProxySettings)), by name
        more = {c.name for _, c in classes if names & set(_base_names(c))} - names
        if not more:
            break
        names |= more
    return [(m, c) for m, c in classes if names & set(_base_names(c))]


def _declared_fields(cls: ast.ClassDef) -> list[str]:
    return [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


def episode_configs(package: Package) -> dict:
    found: list[dict[str, Any]] = []
    for module, cls in pydantic_models(package):
        fields = sorted(EPISODE_FIELDS & set(_declared_fields(cls)))
        if len(fields) >= EPISODE_MIN:
            found.append(
                {
                    "class": cls.name,
                    "module": module.name,
                    "fields": len(_declared_fields(cls)),
                    "episode_fields": fields,
                }
            )
    declared = Counter(f for c in found for f in c["episode_fields"])
    return {
        "count": len(found),
        "classes": found,
        "episode_field_repeats": sum(n - 1 for n in declared.values()),
        "repeated_fields": {f: n for f, n in sorted(declared.items()) if n > 1},
    }


# ---- final-episode definitions


def _reads_final(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "final"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "final"
    if isinstance(node, ast.Compare):
        return (
            isinstance(node.left, ast.Constant)
            and node.left.value == "final"
            and isinstance(node.ops[0], ast.In | ast.NotIn)
        )
    return False


def _boolean_core(expr: ast.expr) -> list[ast.expr]:
    """The parts of a returned value that make it a yes/no: `bool(x)`, `not x`, `x and y`, `x == y`, or x
    itself; not what a call or a container around it carries."""
    if isinstance(expr, ast.BoolOp):
        return [p for v in expr.values for p in _boolean_core(v)]
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        return _boolean_core(expr.operand)
    if isinstance(expr, ast.Compare) and not _reads_final(expr):
        return [p for v in [expr.left, *expr.comparators] for p in _boolean_core(v)]
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "bool" and expr.args:
        return _boolean_core(expr.args[0])
    return [expr]


def _decisions(tree: ast.AST) -> list[ast.AST]:
    """The expressions whose value decides something: tests and comprehension filters (all of them), and the
    yes/no core of returned values."""
    out: list[ast.AST] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.If | ast.While | ast.IfExp | ast.Assert):
            out.append(n.test)
        elif isinstance(n, ast.comprehension):
            out += n.ifs
        elif isinstance(n, ast.Return) and n.value is not None:
            out += [e for e in _boolean_core(n.value) if _reads_final(e)]
    return out


def _definition_name(module: Module, lineno: int) -> str:
    """The top-level function / class.method / constant of `module` that holds line `lineno`."""
    for node in module.tree.body:
        if node.lineno <= lineno <= (node.end_lineno or node.lineno):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
                        item.lineno <= lineno <= (item.end_lineno or item.lineno)
                    ):
                        return f"{node.name}.{item.name}"
                return node.name
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                return node.name
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                return ", ".join(ast.unparse(t) for t in targets)
    return "<module>"


def final_definitions(package: Package) -> dict:
    places: dict[tuple[str, str], list[int]] = {}
    for module in package.modules.values():
        lines = {getattr(n, "lineno", 0) for d in _decisions(module.tree) for n in ast.walk(d) if _reads_final(n)}
        lines |= {
            n.lineno
            for n in ast.walk(module.tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "$.final" in n.value
        }
        for lineno in lines:
            places.setdefault((module.name, _definition_name(module, lineno)), []).append(lineno)
    found = [{"module": m, "definition": d, "lines": sorted(ls)} for (m, d), ls in sorted(places.items())]
    return {"count": len(found), "definitions": found}


# ---- Any in signatures


def _signature_any(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    annotations = [
        x.annotation
        for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
        if x is not None and x.annotation is not None
    ]
    if fn.returns is not None:
        annotations.append(fn.returns)
    return sum(
        1
        for ann in annotations
        for n in ast.walk(ann)
        if (isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
    )


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


class Resolver:
    """Finds where a name a module exports is defined, through `from x import y` re-exports."""

    def __init__(self, package: Package):
        self.package = package

    def resolve(self, module_name: str, name: str, depth: int = 0) -> tuple[Module, ast.AST] | None:
        module = self.package.modules.get(module_name)
        if module is None or depth > 10:
            return None
        for node in module.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
                return module, node
        for statement in ast.walk(module.tree):
            if isinstance(statement, ast.ImportFrom):
                base = absolute(module, statement.level, statement.module)
                for alias in statement.names:
                    if (alias.asname or alias.name) == name and base.startswith(self.package.top):
                        return self.resolve(base, alias.name, depth + 1)
        if module.is_package:  # a lazy export (`__getattr__`): the one submodule that defines it
            hits = [
                self.resolve(sub, name, depth + 1)
                for sub in self.package.modules
                if sub.startswith(module_name + ".") and sub.count(".") == module_name.count(".") + 1
            ]
            hits = [h for h in hits if h]
            if len(hits) == 1:
                return hits[0]
        return None


def _api_signatures(node: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [node]
    if isinstance(node, ast.ClassDef):
        return [
            f
            for f in node.body
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            and (not f.name.startswith("_") or f.name in PUBLIC_DUNDERS)
        ]
    return []


def cross_room_names(package: Package, attributes: bool = True) -> set[tuple[str, str]]:
    """(module, name) of every name a module of one room takes from a module of another (imported by name, and
    with `attributes`, read as an attribute of an imported module)."""
    used: set[tuple[str, str]] = set()
    for imp in package.imports():
        mine = room_of(imp.importer)
        if imp.name and imp.room and imp.room != mine:
            used.add((imp.module, imp.name))
    for module in package.modules.values() if attributes else ():
        attrs = attributes_used(module)
        for alias, target in module_aliases(module, package).items():
            if room_of(target) and room_of(target) != module.room:
                used |= {(target, a) for a in attrs.get(alias, {})}
    return used


def _apis(resolver: Resolver, names: set[tuple[str, str]]) -> tuple[dict[tuple[str, str], int], int]:
    """{(module, definition): Any in its signatures} for the names that resolve to a function or class; and how
    many names do not (constants, type aliases, submodules)."""
    apis: dict[tuple[str, str], int] = {}
    unresolved = 0
    for module_name, name in sorted(names):
        hit = resolver.resolve(module_name, name)
        if hit is None:
            unresolved += 1
            continue
        module, node = hit
        apis[(module.name, node.name)] = sum(_signature_any(f) for f in _api_signatures(node))  # type: ignore[attr-defined]
    return apis, unresolved


def any_in_signatures(package: Package) -> dict:
    total = sum(_signature_any(f) for m in package.modules.values() for f in _functions(m.tree))
    resolver = Resolver(package)
    apis, unresolved = _apis(resolver, cross_room_names(package))
    by_name, _ = _apis(resolver, cross_room_names(package, attributes=False))
    return {
        "all_signatures": total,
        "cross_room": sum(apis.values()),
        "cross_room_apis": len(apis),
        "cross_room_imported_names_only": sum(by_name.values()),
        "cross_room_with_any": {f"{m}.{n}": c for (m, n), c in sorted(apis.items()) if c},
        "cross_room_not_definitions": unresolved,
    }


# ---- exceptions

BUILTIN_EXCEPTIONS = {
    n
    for n in dir(builtins)
    if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException)
}


def _outside_is_exception(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last in BUILTIN_EXCEPTIONS or bool(re.search(r"(Error|Exception|Exit|Abort|Interrupt)$", last))


def exceptions(package: Package) -> dict:
    resolver = Resolver(package)
    classes = {(m.name, c.name): (m, c) for m, c in _classes(package)}

    def package_bases(module: Module, cls: ast.ClassDef) -> tuple[list[tuple[str, str]], list[str]]:
        inside, outside = [], []
        for base in cls.bases:
            text = ast.unparse(base)
            hit = resolver.resolve(module.name, text) if "." not in text else None
            if hit and isinstance(hit[1], ast.ClassDef):
                inside.append((hit[0].name, hit[1].name))
            else:
                outside.append(text)
        return inside, outside

    memo: dict[tuple[str, str], tuple[set[tuple[str, str]], set[str]] | None] = {}

    def roots(key: tuple[str, str]) -> tuple[set[tuple[str, str]], set[str]] | None:
        """(the package's topmost exception classes above `key`, their outside bases); None: no exception."""
        if key in memo:
            return memo[key]
        memo[key] = None
        module, cls = classes[key]
        inside, outside = package_bases(module, cls)
        found_roots: set[tuple[str, str]] = set()
        found_outside: set[str] = set()
        for base in inside:
            r = roots(base)
            if r:
                found_roots |= r[0]
                found_outside |= r[1]
        if not found_roots and any(_outside_is_exception(b) for b in outside):
            found_roots, found_outside = {key}, {b for b in outside if _outside_is_exception(b)}
        memo[key] = (found_roots, found_outside) if found_roots else None
        return memo[key]

    public: list[dict[str, Any]] = []
    private: list[dict[str, Any]] = []
    for key in sorted(classes):
        r = roots(key)
        if r is None:
            continue
        entry = {"class": f"{key[0]}.{key[1]}", "roots": sorted(f"{m}.{n}" for m, n in r[0])}
        (private if key[1].startswith("_") else public).append(entry)
    distinct = sorted({root for e in public for root in e["roots"]})
    outside = sorted({b for key in classes if (r := memo.get(key)) and not key[1].startswith("_") for b in r[1]})
    return {
        "classes": len(public),
        "exception_roots": len(distinct),
        "roots": distinct,
        "outside_bases": outside,
        "private_classes": [e["class"] for e in private],
        "tree": public,
    }


# ---- cli and module size


def cli_and_size(package: Package, root: Path) -> dict:
    cli = [m for m in package.modules.values() if room_of(m.name) == "cli"]
    function_imports = [
        n for m in cli for f in _functions(m.tree) for n in ast.walk(f) if isinstance(n, ast.Import | ast.ImportFrom)
    ]
    names = Counter(f.name for m in package.modules.values() for f in _functions(m.tree))
    return {
        "cli_lines": sum(m.lines for m in cli),
        "cli_largest_module_lines": max((m.lines for m in cli), default=0),
        "cli_imports_in_functions": len(function_imports),
        "cli_imports_of_openforge_in_functions": sum(
            1
            for n in function_imports
            if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith(package.top))
        ),
        "modules_over_limit": {
            str(m.path.relative_to(root)): m.lines
            for m in sorted(package.modules.values(), key=lambda m: -m.lines)
            if m.lines > MAX_LINES
        },
        "definitions": {n: names[n] for n in DUPLICATE_NAMES},
    }


# ---- the report


def measure(root: Path) -> dict:
    package = load_package(root)
    return {
        "episode_configs": episode_configs(package),
        "final_definitions": final_definitions(package),
        "any_in_signatures": any_in_signatures(package),
        "exceptions": exceptions(package),
        "cli_and_size": cli_and_size(package, root),
    }


def summary(m: dict) -> list[tuple[str, object]]:
    """The table's rows: (what, count)."""
    c = m["cli_and_size"]
    return [
        ("config classes that describe an episode", m["episode_configs"]["count"]),
        ("  episode field names declared again", m["episode_configs"]["episode_field_repeats"]),
        ("definitions of a final episode", m["final_definitions"]["count"]),
        ("Any in signatures (all)", m["any_in_signatures"]["all_signatures"]),
        ("Any in signatures of cross-room APIs", m["any_in_signatures"]["cross_room"]),
        ("  of names imported across rooms (no module.attr)", m["any_in_signatures"]["cross_room_imported_names_only"]),
        ("exception classes", m["exceptions"]["classes"]),
        ("exception roots", m["exceptions"]["exception_roots"]),
        ("cli lines", c["cli_lines"]),
        ("  cli imports of openforge inside functions", c["cli_imports_of_openforge_in_functions"]),
        (f"modules over {MAX_LINES} lines", len(c["modules_over_limit"])),
        *((f"definitions of {n}", k) for n, k in c["definitions"].items()),
    ]


def _git(root: Path, *args: str) -> str:
    r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the checkout to measure (default: this one)",
    )
    parser.add_argument("--json", type=Path, help="write the counts and what was counted here")
    parser.add_argument("--commit", help="the commit measured, when PATH is not a git checkout (git archive)")
    args = parser.parse_args(argv)
    root = args.path.resolve()
    if not (root / "openforge").is_dir():
        parser.error(f"{root}: no openforge/ package here; pass the checkout's root")
    metrics = measure(root)
    width = max(len(k) for k, _ in summary(metrics))
    for what, n in summary(metrics):
        print(f"{what:<{width}}  {n}")
    if args.json:
        commit = args.commit or _git(root, "rev-parse", "HEAD")
        out = args.json if not args.json.is_absolute() else Path(args.json.name)
        cmd = [
            "python",
            "scripts/code_metrics.py",
            f"<checkout of {commit[:12] or 'the tree'}>",
            *(["--commit", args.commit] if args.commit else []),
            "--json",
            str(out),
        ]
        record = {
            "commit": commit,
            "command": " ".join(cmd),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus, "
            f"Python {platform.python_version()}",
            "summary": dict(summary(metrics)),
            **metrics,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
