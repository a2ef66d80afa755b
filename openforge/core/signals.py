"""SIGTERM stops work as Ctrl-C does (kubectl delete, systemd, a CI runner's timeout, `kill`): the interrupt
unwinds through the `finally` blocks that destroy sandboxes, instead of the process dying with its containers
left running."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


def terminate_like_ctrl_c(signum: int, frame: FrameType | None) -> None:
    """A SIGTERM handler: whatever SIGINT does now (asyncio's cancels the main task; Python's default raises
    KeyboardInterrupt)."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Within the block, SIGTERM is Ctrl-C — where the process has left SIGTERM at its default (a handler of the
    caller's own is kept) and only on the main thread (the only one Python delivers signals to); the previous
    handler comes back after."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, terminate_like_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
