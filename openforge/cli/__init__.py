"""The `openforge` command line. Thin: each command parses its options and calls one function of a room
(docs/design.md, "Rooms"); what stops a command is turned into its exit status and message in one place
(`errors.py`). One module per group of commands; the rooms are imported when a command runs, so that
`openforge --help` and the light core (no torch) load only typer and the option defaults."""

from __future__ import annotations

import contextlib
import faulthandler
import io
import signal
import sys
from typing import Annotated

import typer
from rich.console import Console

from openforge import __version__
from openforge.cli import harness, k8s, model, results, runs, serve, tasks, verl
from openforge.cli.errors import OpenForgeGroup, missing_extra_message
from openforge.core.signals import terminate_like_ctrl_c

__all__ = ["app", "main", "missing_extra_message"]

console = Console()

app = typer.Typer(
    cls=OpenForgeGroup,
    help="OpenForge: train LLM agents with RL through the real harnesses they run in.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        console.print(f"openforge {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print OpenForge's version and exit."),
    ] = False,
) -> None:
    signal.signal(signal.SIGTERM, terminate_like_ctrl_c)
    # `kill -USR1 <pid>` prints every thread's stack to stderr: what a command that seems stuck is waiting on
    # (the process's own stderr: a test runner's captured one has no file descriptor). A handler the caller
    # installed (a profiler driving the proxy, say) is theirs: faulthandler would replace it.
    if sys.__stderr__ is not None and signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
        with contextlib.suppress(ValueError, io.UnsupportedOperation):  # a closed or descriptor-less stream
            faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)


@app.command()
def version() -> None:
    """Print OpenForge's version."""
    console.print(__version__)


app.command("serve-model")(serve.serve_model_cmd)
app.command()(serve.proxy)
app.command(
    "rollout", help="Run harness episodes on tasks, each in its own sandbox, graded by the task's hidden tests."
)(runs.with_rollout_options(runs.run_rollout))
app.command(
    "eval",
    help="Rollouts plus a report: pass@k and pass^k per task, per harness and overall; outcome "
    "classes; replies cut off by a length cap or not parsed.",
)(runs.with_rollout_options(runs.run_evaluation))
app.command()(results.export)
app.command()(results.analyze)
app.command()(serve.view)
app.command()(runs.train)
app.command()(runs.quickstart)
app.add_typer(model.model_app, name="model")
app.add_typer(tasks.tasks_app, name="tasks")
app.add_typer(harness.harness_app, name="harness")
app.add_typer(k8s.k8s_app, name="k8s")
app.add_typer(verl.verl_app, name="verl")


def main() -> None:
    """The `openforge` command (console entry point)."""
    app()
