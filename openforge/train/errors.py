"""The training pipeline's error types."""

from openforge.core.errors import ConfigurationError, Interrupted


class TrainError(ConfigurationError, RuntimeError):
    """The run cannot start or go on as configured; the message says what to do."""


class TrainInterrupted(Interrupted, TrainError):
    """Ctrl-C or SIGTERM stopped a phase: what finished is kept, nothing after it ran; `--resume` goes on."""

    def __init__(self, phase: str | None = None):
        where = f" during {phase}" if phase else ""
        super().__init__(f"interrupted{where}: finished work is kept; continue with --resume")
