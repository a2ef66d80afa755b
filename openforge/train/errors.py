"""The training pipeline's one error type."""


class TrainError(RuntimeError):
    """The run cannot start or go on; the message says what to do."""
