"""Write the generated pages of the documentation site: the command reference, one page per command of
`openforge` (docs/cli/), made from the Typer app itself — its help text, arguments and options — so the pages say
what `--help` says; and the home page (docs/index.md), which is the README with its links made relative to docs/.

    python scripts/docs_site.py           # rewrite docs/cli/ and docs/index.md
    python scripts/docs_site.py --check   # exit 1 if either differs from its source (tests run this)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import typer
import typer.main
from typer.core import TyperArgument, TyperOption

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "cli"


def commands(
    group: typer.core.TyperCommand, prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], typer.core.TyperCommand]]:
    """(path, command) of every leaf command under `group`, in the order `--help` lists them."""
    found: list[tuple[tuple[str, ...], typer.core.TyperCommand]] = []
    subs = getattr(group, "commands", None)
    if not subs:
        return [(prefix, group)]
    for name, sub in subs.items():
        found += commands(sub, prefix + (name,))
    return found


def page_name(path: tuple[str, ...]) -> str:
    return "-".join(path) + ".md"


def _default(param: TyperOption | TyperArgument) -> str:
    if param.required:
        return "required"
    default = param.default
    if default is None or default == () or callable(default):
        return ""
    if isinstance(default, bool) and isinstance(param, TyperOption) and param.secondary_opts:
        return param.opts[0] if default else param.secondary_opts[0]
    return f"`{default}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def command_page(path: tuple[str, ...], command: typer.core.TyperCommand) -> str:
    ctx = typer.Context(command, info_name="openforge " + " ".join(path))
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"# openforge {' '.join(path)}", "", "```text", f"openforge {' '.join(path)} {usage}".rstrip(), "```", ""]
    lines += [(command.help or "").strip(), ""]
    params = [p for p in command.params if p.name != "help"]
    arguments = [p for p in params if isinstance(p, TyperArgument)]
    options = [p for p in params if isinstance(p, TyperOption)]
    if arguments:
        lines += ["## Arguments", "", "| argument | | help |", "|---|---|---|"]
        for p in arguments:
            helptext = getattr(p, "help", "") or ""
            lines.append(f"| `{(p.name or '').upper()}` | {_default(p)} | {_cell(helptext)} |")
        lines.append("")
    if options:
        lines += ["## Options", "", "| option | default | help |", "|---|---|---|"]
        for p in options:
            names = " / ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            lines.append(f"| {names} | {_default(p)} | {_cell(p.help or '')} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def pages() -> dict[str, str]:
    from openforge.cli import app

    root = typer.main.get_command(app)
    found = commands(root)
    index = [
        "# Command reference",
        "",
        "Every command of `openforge`, as its `--help` describes it (written by `scripts/docs_site.py`; the tests",
        "check these pages against the commands).",
        "",
    ]
    index += ["| command | what it does |", "|---|---|"]
    out: dict[str, str] = {}
    for path, command in found:
        out[page_name(path)] = command_page(path, command)
        summary = _cell((command.help or "").strip().split("\n\n")[0])
        index.append(f"| [`openforge {' '.join(path)}`]({page_name(path)}) | {summary} |")
    out["index.md"] = "\n".join(index) + "\n"
    return out


def home_page() -> str:
    """docs/index.md: the README, its links made relative to docs/."""
    readme = (ROOT / "README.md").read_text()
    return readme.replace("](docs/", "](").replace(
        "The full documentation is in [docs/](index.md) (a MkDocs site: `mkdocs serve`); this page is the short"
        "\nversion.",
        "This site is the full documentation; the repository's README is this page.",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    wanted = pages()
    home = ROOT / "docs" / "index.md"
    if args.check:
        have = {p.name: p.read_text() for p in OUT.glob("*.md")} if OUT.is_dir() else {}
        stale = [f"cli/{n}" for n in sorted(set(wanted) | set(have)) if wanted.get(n) != have.get(n)]
        if not home.is_file() or home.read_text() != home_page():
            stale.append("index.md")
        if stale:
            print(f"docs/ is out of date ({', '.join(stale)}): run python scripts/docs_site.py", file=sys.stderr)
            return 1
        return 0
    home.write_text(home_page())
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.md"):
        if old.name not in wanted:
            old.unlink()
    for name, text in wanted.items():
        (OUT / name).write_text(text)
    print(f"{len(wanted)} pages in {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
