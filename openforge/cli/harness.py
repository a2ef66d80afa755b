"""`openforge harness`: install and check the real harnesses. The harness room is imported when a command
runs, not for `openforge --help`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

console = Console()
harness_app = typer.Typer(
    help="Install and check the real harnesses (Claude Code, Codex CLI, OpenClaw).", no_args_is_help=True
)


@harness_app.command("install")
def harness_install(
    harness: list[str] | None = typer.Option(None, "--harness", help="Install only these (repeatable); default: all."),
    bundle: Path | None = typer.Option(None, help="Bundle directory (default: $OPENFORGE_HOME/harnesses)."),
    force: bool = typer.Option(False, help="Reinstall even what is already installed."),
) -> None:
    """Install the pinned, tested harness versions from npm into a local bundle and print their versions."""
    from openforge.harness import ALL_HARNESSES, default_bundle_dir, install_harnesses

    versions = install_harnesses(bundle, tuple(harness or ALL_HARNESSES), console=console, force=force)
    for name, v in versions.items():
        console.print(f"[green]✓[/] {name} {v}")
    console.print(f"bundle: {bundle or default_bundle_dir()}")


@harness_app.command("list")
def harness_list(bundle: Path | None = typer.Option(None, help="Bundle directory.")) -> None:
    """Show each known harness, the dialect it speaks, and the version installed in the bundle."""
    from openforge.harness import harness_versions

    table = Table("harness", "dialect", "pinned", "installed")
    for row in harness_versions(bundle):
        table.add_row(*row)
    console.print(table)


@harness_app.command("image")
def harness_image(
    bundle: Path | None = typer.Option(None, help="Bundle directory (default: $OPENFORGE_HOME/harnesses)."),
    base: str = typer.Option("openforge-base:bookworm", help="Local base image (needs `cp`; never pulled)."),
    tag: str | None = typer.Option(None, help="Local tag (default: openforge-harnesses:<manifest hash>)."),
    push: str | None = typer.Option(
        None,
        "--push",
        help="Registry (host, optionally /path) to tag and push the image to, e.g. registry.example/team.",
    ),
) -> None:
    """Build the harness bundle image for Kubernetes sandboxes (an init container copies the bundle from it)."""
    from openforge.harness import default_bundle_dir
    from openforge.harness.image import build_harness_image

    built = build_harness_image(bundle or default_bundle_dir(), base=base, tag=tag, push=push)
    console.print(f"built [bold]{built.tag}[/]")
    for ref in built.pushed:
        console.print(f"pushed [bold]{ref}[/]: use it with --sandbox-option harness_image={ref}")
