"""What the modules of a Python package import, read with `ast` (nothing is imported or run).

Shared by scripts/check_rooms.py (the rooms table of docs/design.md) and scripts/code_metrics.py.

Every import statement counts, wherever it is: at the top of a module, inside a function (a lazy import is
still a dependency), and under `if TYPE_CHECKING:` (a type-only import still ties one room's signatures to
another room's types). `importlib.import_module("openforge.x...")` with a string literal (or an f-string whose
literal head names the module) counts too. A module a package reaches through `pkgutil` scanning cannot be
seen statically and is not counted.

A module's room is the package right under the top package: `openforge.sandbox.docker.sandbox` is in room
`sandbox`; a module directly under the top package is a room of its own (`openforge.cli` is room `cli`,
`openforge.config` room `config`); the top package `openforge` itself (its `__init__`) has room "".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Module:
    name: str  # dotted: openforge.store.queries
    path: Path
    is_package: bool  # an __init__.py
    tree: ast.Module
    lines: int

    @property
    def room(self) -> str:
        return room_of(self.name)


@dataclass(frozen=True)
class Import:
    importer: str  # the importing module
    lineno: int
    module: str  # the imported module (a submodule when `from pkg import submodule`)
    name: str | None  # the imported name; None for a whole module
    type_checking: bool  # under `if TYPE_CHECKING:`
    in_function: bool  # inside a function body

    @property
    def room(self) -> str:
        return room_of(self.module)


@dataclass
class Package:
    top: str  # "openforge"
    modules: dict[str, Module] = field(default_factory=dict)

    def imports(self) -> list[Import]:
        return [i for m in self.modules.values() for i in module_imports(m, self)]


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def module_name(path: Path, root: Path) -> str:
    """`root/openforge/store/queries.py` → `openforge.store.queries` (root: the directory above the package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def load_package(root: Path, top: str = "openforge") -> Package:
    """Every module of package `top` under directory `root`, parsed. A file that does not parse raises
    SyntaxError naming it."""
    package = Package(top)
    for path in sorted((root / top).rglob("*.py")):
        text = path.read_text()
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError as e:
            raise SyntaxError(f"{path}: {e}") from None
        name = module_name(path, root)
        package.modules[name] = Module(name, path, path.name == "__init__.py", tree, len(text.splitlines()))
    return package


def absolute(module: Module, level: int, target: str | None) -> str:
    """The absolute name of `from <level dots><target> import ...` written in `module`."""
    if not level:
        return target or ""
    base = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _literal_head(node: ast.expr) -> str | None:
    """The string of a literal, or the literal head of an f-string (`f"openforge.train.{m}"` → "openforge.train.")."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def module_imports(module: Module, package: Package) -> list[Import]:
    """The imports of `package`'s own modules that `module` makes (imports of other packages are left out)."""
    found: list[Import] = []

    def add(node: ast.AST, target: str, name: str | None, type_checking: bool, in_function: bool) -> None:
        if target == package.top or target.startswith(package.top + "."):
            found.append(Import(module.name, getattr(node, "lineno", 0), target, name, type_checking, in_function))

    def visit(node: ast.AST, type_checking: bool, in_function: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name, None, type_checking, in_function)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(module, node.level, node.module)
            for alias in node.names:
                if alias.name == "*":
                    add(node, base, None, type_checking, in_function)
                elif f"{base}.{alias.name}" in package.modules:
                    add(node, f"{base}.{alias.name}", None, type_checking, in_function)
                else:
                    add(node, base, alias.name, type_checking, in_function)
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
        ):
            head = _literal_head(node.args[0])
            if head:
                add(node, head.rstrip("."), None, type_checking, in_function)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True, in_function)
            for child in node.orelse:
                visit(child, type_checking, in_function)
            return
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for sub in ast.iter_child_nodes(node):
            visit(sub, type_checking, inner)

    visit(module.tree, False, False)
    return found


def module_aliases(module: Module, package: Package) -> dict[str, str]:
    """Local names bound to whole modules of the package in `module`: {alias: module name}
    (`from openforge.dialects import wire` → {"wire": "openforge.dialects.wire"}; `import openforge.x as y`)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in package.modules:
                    aliases[a.asname] = a.name
                elif a.name in package.modules:
                    aliases[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = absolute(module, node.level, node.module)
            for a in node.names:
                if f"{base}.{a.name}" in package.modules:
                    aliases[a.asname or a.name] = f"{base}.{a.name}"
    return aliases


def attributes_used(module: Module) -> dict[str, dict[str, int]]:
    """The attributes `module` reads on each plain name, with the first line that does
    (`wire.decode(...)` on line 12 → {"wire": {"decode": 12}})."""
    used: dict[str, dict[str, int]] = {}
    for n in ast.walk(module.tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            attrs = used.setdefault(n.value.id, {})
            attrs[n.attr] = min(attrs.get(n.attr, n.lineno), n.lineno)
    return used
