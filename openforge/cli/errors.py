"""How a command ends when something stops it: the one place that turns OpenForge's error tree
(`openforge.core.errors`, docs/design.md "Errors") into an exit status and one message a person can act on.

- 2: the user's input or configuration is wrong (a `ConfigurationError` or `TaskError`; a missing optional
  package, with the extra that brings it);
- 1: the work failed (any other `OpenForgeError`);
- 130: Ctrl-C or SIGTERM stopped it (`Interrupted`, or a bare KeyboardInterrupt), as the shell does.

An OpenForge error prints its message and no traceback; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from openforge.core.errors import (
    ConfigurationError,
    InfrastructureError,
    Interrupted,
    ModelError,
    OpenForgeError,
    RequestError,
    StoreError,
    TaskError,
    kind_of,
)

err_console = Console(stderr=True)

EXIT_STATUS: dict[type[OpenForgeError], int] = {
    ConfigurationError: 2,
    TaskError: 2,  # the user's input: fix it and run again
    InfrastructureError: 1,
    ModelError: 1,
    StoreError: 1,
    RequestError: 1,  # the work failed
    Interrupted: 130,  # 128 + SIGINT, as the shell reports Ctrl-C
}
WORK_FAILED = 1  # an OpenForgeError of no kind
MISSING_EXTRA = 2

# What each optional module is installed with (`pip install 'openforge-rl[EXTRA]'`): a command that needs one
# that is missing says which extra to install instead of printing an ImportError's traceback.
_EXTRA_OF_MODULE = {
    "torch": "engine",
    "transformers": "engine",
    "safetensors": "engine",
    "docker": "docker",
    "kubernetes": "kubernetes",
    "matplotlib": "report",
    "pyarrow": "report",
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "trackio": "trackio",
    "verl": "verl",
}


class OptionError(ConfigurationError):
    """A command-line option's value is wrong; the message names the option and what is allowed."""


def missing_extra_message(error: ModuleNotFoundError) -> str | None:
    """The fix for a missing optional module, or None when the module is not an optional one."""
    top = (error.name or "").split(".")[0]
    extra = _EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    message = f"this command needs {top}, which is not installed: pip install 'openforge-rl[{extra}]'"
    if top == "torch" or extra == "engine":
        message += (
            " and PyTorch, which is not a dependency (an unpinned torch pulls a CUDA build): install the "
            "build for your machine first, e.g. the CPU build as scripts/setup.sh does"
        )
    return message


def exit_status(error: BaseException) -> int | None:
    """The exit status a command ends with after `error`; None for an exception that is not OpenForge's (a
    bug: it keeps its traceback)."""
    if isinstance(error, KeyboardInterrupt):
        return EXIT_STATUS[Interrupted]
    if isinstance(error, ModuleNotFoundError):
        return MISSING_EXTRA if missing_extra_message(error) is not None else None
    if isinstance(error, OpenForgeError):
        kind = kind_of(error)
        return EXIT_STATUS[kind] if kind is not None else WORK_FAILED
    return None


def tell(error: BaseException) -> None:
    """Print what stopped the command: its message on stderr, plain text (`openforge-rl[engine]` is not
    markup) and not wrapped, so that a command in it can be copied."""
    if isinstance(error, (Interrupted, KeyboardInterrupt)):
        message = str(error) if isinstance(error, Interrupted) else "interrupted"
        if message:  # empty: the work already said where it stopped
            err_console.print(f"[yellow]{escape(message)}[/]", soft_wrap=True)
        return
    if isinstance(error, ModuleNotFoundError):
        message = missing_extra_message(error) or str(error)
    else:
        message = str(error) or type(error).__name__
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


class OpenForgeGroup(TyperGroup):
    """The root command group: every command runs inside its `invoke`, so an error that stops one ends here."""

    # typer hands its own Context (typer.Context); its types name the base class of its vendored click, which
    # is private (typer._click), as the parameter
    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (OpenForgeError, KeyboardInterrupt, ModuleNotFoundError) as error:
            status = exit_status(error)
            if status is None:
                raise
            tell(error)
            raise typer.Exit(status) from None
