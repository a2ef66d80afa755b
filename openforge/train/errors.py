"""The training pipeline's error types."""


class TrainError(RuntimeError):
    """The run cannot start or go on; the message says what to do."""


class TrainInterrupted(TrainError):
    """Ctrl-C or SIGTERM stopped a phase: what finished is kept, nothing after it ran; `--resume` goes on."""

    def __init__(self, phase: str):
        super().__init__(f"interrupted during {phase}: finished work is kept; continue with --resume")
