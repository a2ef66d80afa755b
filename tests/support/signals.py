"""Signals for child processes that a test interrupts."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """A terminal's Ctrl-C for the child (a `preexec_fn`): SIGINT unblocked and at its default, whatever earlier
    tests left in this process (an ignored or blocked SIGINT is inherited across exec, and the interrupt is then
    lost; `multiprocess`'s resource tracker, used by veRL's dataset tests, ignores and blocks it)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)
