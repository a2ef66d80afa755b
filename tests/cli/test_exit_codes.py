"""The one mapping from OpenForge's error tree to exit statuses (`openforge.cli.errors`): each kind ends a
command with its status and its message, without a traceback; anything else is a bug and keeps its traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from openforge.cli import app
from openforge.cli.errors import OpenForgeGroup, OptionError
from openforge.core.errors import (
    ConfigurationError,
    InfrastructureError,
    Interrupted,
    ModelError,
    OpenForgeError,
    RequestError,
    StoreError,
    TaskError,
)
from openforge.harness.bundle import BundleSetupError
from openforge.inference import BackendSpecError
from openforge.rollout.run import RolloutInterrupted
from openforge.sandbox import SandboxError, SandboxSetupError
from openforge.train.errors import TrainError, TrainInterrupted

CASES = [  # (what the command raises, exit status, what the message says; None: nothing printed)
    (ConfigurationError("fix the option"), 2, "error: fix the option"),
    (OptionError("--x 'y': use a or b"), 2, "error: --x 'y': use a or b"),
    (TaskError("task.toml: [agent] timeout_sec must be positive"), 2, "error: task.toml"),
    (InfrastructureError("the sandbox died"), 1, "error: the sandbox died"),
    (ModelError("the server answered 500"), 1, "error: the server answered 500"),
    (StoreError("row 3 cannot be decoded"), 1, "error: row 3 cannot be decoded"),
    (RequestError("bad request"), 1, "error: bad request"),
    (OpenForgeError("of no kind"), 1, "error: of no kind"),
    (Interrupted("interrupted: run it again to resume"), 130, "interrupted: run it again to resume"),
    (KeyboardInterrupt(), 130, "interrupted"),
    (RolloutInterrupted(), 130, None),  # the orchestrator already said where it stopped
    # a class of two kinds: its first kind decides
    (TrainInterrupted("GRPO step 3"), 130, "interrupted during GRPO step 3: finished work is kept"),
    (TrainError("pass --resume"), 2, "error: pass --resume"),
    (BackendSpecError("backend 'x' is not understood"), 2, "error: backend 'x' is not understood"),
    (BundleSetupError("run `openforge harness install`"), 2, "error: run `openforge harness install`"),
    (SandboxSetupError("no Kubernetes credentials"), 2, "error: no Kubernetes credentials"),
    (SandboxError("the container stopped"), 1, "error: the container stopped"),
    (ModuleNotFoundError("No module named 'torch'", name="torch"), 2, "pip install 'openforge-rl[engine]'"),
    (
        ModuleNotFoundError("No module named 'kubernetes'", name="kubernetes"),
        2,
        "pip install 'openforge-rl[kubernetes]'",
    ),
]


def raising(error: BaseException) -> typer.Typer:
    """An app on the CLI's root group with one command that raises `error`."""
    test_app = typer.Typer(cls=OpenForgeGroup, pretty_exceptions_enable=False, add_completion=False)

    @test_app.command()
    def work() -> None:
        raise error

    @test_app.command()
    def other() -> None:  # two commands: `work` is a subcommand, as in the real app
        pass

    return test_app


def test_the_command_line_runs_on_the_mapping_group():
    assert isinstance(typer.main.get_command(app), OpenForgeGroup)


@pytest.mark.parametrize(
    ("error", "status", "says"), CASES, ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v)
)
def test_each_kind_ends_with_its_status_and_message(error, status, says):
    result = CliRunner().invoke(raising(error), ["work"])
    assert result.exit_code == status, result.output
    assert isinstance(result.exception, SystemExit)
    out = " ".join(result.output.split())
    assert "Traceback" not in out
    if says is None:
        assert out == ""
    else:
        assert says in out and len(result.output.strip().splitlines()) == 1  # one message, on one line


@pytest.mark.parametrize(
    "error",
    [ValueError("a bug"), ModuleNotFoundError("No module named 'nope'", name="nope")],
    ids=["ValueError", "an unknown module"],
)
def test_anything_else_is_not_caught(error):
    result = CliRunner().invoke(raising(error), ["work"])
    assert result.exception is error  # propagates: the interpreter prints its traceback


def test_a_bug_prints_its_traceback_and_an_openforge_error_does_not(tmp_path):
    script = tmp_path / "cli.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        import typer
        from openforge.cli.errors import OpenForgeGroup
        from openforge.core.errors import InfrastructureError

        app = typer.Typer(cls=OpenForgeGroup, pretty_exceptions_enable=False, add_completion=False)

        @app.command()
        def bug() -> None:
            raise ValueError("a bug")

        @app.command()
        def failed() -> None:
            raise InfrastructureError("the sandbox died")

        app()
    """)
    )
    bug = subprocess.run([sys.executable, str(script), "bug"], capture_output=True, text=True)
    assert bug.returncode == 1 and "Traceback" in bug.stderr and "ValueError: a bug" in bug.stderr
    failed = subprocess.run([sys.executable, str(script), "failed"], capture_output=True, text=True)
    assert failed.returncode == 1 and failed.stderr.strip() == "error: the sandbox died"


def test_sigusr1_dumps_stacks_unless_the_caller_took_it():
    """The CLI prints every thread's stack on SIGUSR1 (what a stuck command waits on), but a SIGUSR1 handler the
    caller installed before calling the app (the proxy benchmark's profiler switch) is left in place."""
    script = textwrap.dedent(
        """
        import os, signal, sys
        from openforge.cli import app
        taken = sys.argv[1] == "taken"
        if taken:
            signal.signal(signal.SIGUSR1, lambda *_: print("caller's handler", flush=True))
        try:
            app(args=["version"], prog_name="openforge")
        except SystemExit:
            pass
        os.kill(os.getpid(), signal.SIGUSR1)
        print("still alive", flush=True)
        """
    )
    taken = subprocess.run([sys.executable, "-c", script, "taken"], capture_output=True, text=True, timeout=60)
    assert taken.returncode == 0, taken.stderr
    assert "caller's handler" in taken.stdout and "still alive" in taken.stdout
    assert "Current thread" not in taken.stderr
    default = subprocess.run([sys.executable, "-c", script, "default"], capture_output=True, text=True, timeout=60)
    assert default.returncode == 0, default.stderr
    assert "Current thread" in default.stderr and "still alive" in default.stdout
