"""A token bucket for asyncio: at most `burst` operations at once, refilled at `rate` per second.

The Kubernetes backend takes one token per pod it creates, so a run of thousands of episodes does not hit
the API server (and the scheduler) with thousands of pod creations in the same second."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    def __init__(self, rate: float, burst: int = 1, *, clock: Callable[[], float] = time.monotonic):
        if rate <= 0:
            raise ValueError(f"creation rate must be > 0 per second, got {rate}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self.rate = float(rate)
        self.burst = int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()
        self._lock = asyncio.Lock()  # waiters are served in arrival order

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self) -> None:
        async with self._lock:
            self._refill()
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.rate)
                self._refill()
            self._tokens -= 1
