"""Check the package's imports against the rooms table of docs/design.md ("## Rooms", column `may import`).

    python scripts/check_rooms.py [--root DIR] [--design FILE]

Prints one violation a line and a summary; exits 1 on any violation, 2 when the table cannot be read.
tests/test_rooms.py runs the same check on the real tree and on planted violations.

The rules:
- every module under openforge/ belongs to a room of the table: `openforge/<room>/...` to row `<room>`,
  `openforge/<name>.py` (or a package `openforge/<name>/` replacing it) to row `<name>.py`;
- a module may import its own room, the rooms its row's `may import` cell names, and the top package
  `openforge` itself (its `__init__` holds only `__version__`); nothing else of OpenForge. Every import counts
  (top-level, inside functions, under TYPE_CHECKING, `importlib.import_module` of a literal name: see
  scripts/package_imports.py);
- no module imports a private name (`_x`) or a private module (`_x.py`) of another room, nor reads a private
  attribute of another room's module it imported (`wire._decode`).

How a `may import` cell is read: backquoted room names (a parenthesis after a name says what for and is
ignored); "nothing of OpenForge" (no room); "all" (every room); "everything above except `a`, `b`" (the rows
above this one, less those named). Any other wording is an error, so the table stays machine-readable.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from package_imports import Import, Package, attributes_used, load_package, module_aliases, room_of

REPO = Path(__file__).resolve().parent.parent


ALL = "*"  # a `may import` of "all": any room of the package


class TableError(ValueError):
    """The rooms table is missing or a cell cannot be read; the message names the row."""


@dataclass(frozen=True)
class Violation:
    path: str  # relative to the checkout: openforge/train/quickstart.py
    lineno: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.lineno}: {self.message}"


def _room_name(cell: str) -> str:
    """`core` → core; `cli.py` → cli (the module, or the package replacing it)."""
    name = cell.strip().strip("`")
    return name[:-3] if name.endswith(".py") else name


def read_rooms_table(design: Path) -> dict[str, set[str]]:
    """{room: rooms it may import}, in the table's order, from the "## Rooms" section of `design`."""
    text = design.read_text()
    section = re.search(r"^## Rooms\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if section is None:
        raise TableError(f"{design}: no '## Rooms' section")
    rows: list[tuple[str, str]] = []
    header: list[str] | None = None
    for line in section.group(1).splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        rows.append((_room_name(cells[0]), cells[header.index("may import")]))
    if header is None or "may import" not in header or not rows:
        raise TableError(f"{design}: the '## Rooms' section has no table with a 'may import' column")
    rooms = [name for name, _ in rows]
    allowed: dict[str, set[str]] = {}
    for i, (name, cell) in enumerate(rows):
        plain = re.sub(r"\([^)]*\)", "", cell).strip()
        named = set(re.findall(r"`([^`]+)`", plain))
        unknown = {n for n in named if _room_name(n) not in rooms}
        if unknown:
            raise TableError(f"{design}: room {name!r} may import {sorted(unknown)}, which are not rooms of the table")
        named = {_room_name(n) for n in named}
        if plain == "nothing of OpenForge":
            allowed[name] = set()
        elif plain == "all":
            allowed[name] = {ALL}
        elif plain.startswith("everything above"):
            if not re.fullmatch(r"everything above( except (`[^`]+`(, | and )?)+)?", plain):
                raise TableError(f"{design}: cannot read the 'may import' cell of room {name!r}: {cell!r}")
            allowed[name] = set(rooms[:i]) - named
        elif named and re.fullmatch(r"(`[^`]+`\s*(,\s*)?)+", plain):
            allowed[name] = named
        else:
            raise TableError(
                f"{design}: cannot read the 'may import' cell of room {name!r}: {cell!r} (write "
                "backquoted room names, 'nothing of OpenForge', 'all' or 'everything above except ...')"
            )
    return allowed


def check(package: Package, allowed: dict[str, set[str]], root: Path) -> list[Violation]:
    """Every way the package's imports break the table (see the module docstring), sorted by file and line."""
    found: list[Violation] = []

    def where(module: str) -> str:
        return str(package.modules[module].path.relative_to(root))

    for module in package.modules.values():
        if module.room and module.room not in allowed:
            found.append(
                Violation(
                    where(module.name),
                    1,
                    f"{module.name} is in room {module.room!r}, which the rooms table of docs/design.md does not list",
                )
            )
    statements: dict[tuple[str, int, str], list[Import]] = {}  # one finding per import statement and module
    for imp in package.imports():
        statements.setdefault((imp.importer, imp.lineno, imp.module), []).append(imp)
    for (importer, _, _), imports in statements.items():
        found += _check_statement(imports, package.modules[importer].room, allowed, where(importer))
    for module in package.modules.values():  # `from openforge.dialects import wire` ... `wire._decode`
        used = attributes_used(module)
        for alias, target in module_aliases(module, package).items():
            if room_of(target) not in ("", module.room):
                for attr, lineno in sorted(used.get(alias, {}).items()):
                    if _private(attr):
                        found.append(
                            Violation(
                                where(module.name),
                                lineno,
                                f"room {module.room!r} uses the private {target}.{attr} of room {room_of(target)!r}",
                            )
                        )
    return sorted(found, key=lambda v: (v.path, v.lineno, v.message))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _check_statement(imports: list[Import], mine: str, allowed: dict[str, set[str]], path: str) -> list[Violation]:
    """The violations of one statement's imports of one module (`from m import a, b`)."""
    first = imports[0]
    theirs = first.room
    if mine == theirs or not theirs:
        return []
    names = [i.name for i in imports if i.name]
    what = first.module + (f" ({', '.join(names)})" if names else "")
    how = " under TYPE_CHECKING" if first.type_checking else " inside a function" if first.in_function else ""
    found = []
    may = allowed.get(mine, {ALL})
    if ALL not in may and theirs not in may:
        listed = ", ".join(sorted(may)) or "nothing of OpenForge"
        found.append(
            Violation(
                path, first.lineno, f"room {mine!r} imports {what}{how}; the rooms table lets {mine!r} import {listed}"
            )
        )
    private = [p for p in first.module.split(".") if _private(p)] + [n for n in names if _private(n)]
    if private:
        found.append(
            Violation(
                path, first.lineno, f"room {mine!r} imports the private {', '.join(private)} of room {theirs!r}{how}"
            )
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout (default: this one)")
    parser.add_argument("--design", type=Path, help="the design document (default: ROOT/docs/design.md)")
    args = parser.parse_args(argv)
    try:
        allowed = read_rooms_table(args.design or args.root / "docs/design.md")
    except TableError as e:
        print(e, file=sys.stderr)
        return 2
    violations = check(load_package(args.root), allowed, args.root)
    for v in violations:
        print(v)
    print(f"rooms: {len(violations)} violation(s) of the rooms table")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
