"""Group commit for asyncio servers: many concurrent `await add_call(...)`, few transactions.

The proxy serves many streams at once and must not send a response's last event before its call is
durable. Committing each call in its own transaction from the event loop would block the loop; committing
from a thread per call would serialize on SQLite's write lock. Instead one background thread takes every
record queued since its last commit and writes them in a single transaction, then wakes all their callers:
the more concurrent callers, the more records share a commit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from dataclasses import dataclass

from openforge.core import CallRecord
from openforge.store.errors import StoreClosedError
from openforge.store.store import TrajectoryStore

_STOP = object()
# A record whose request body is at most this is committed by its caller when the writer is idle.
_INLINE_BYTES = 16 * 1024


@dataclass
class WriterStats:
    records: int = 0  # records committed
    transactions: int = 0  # commits that held at least one record
    largest_batch: int = 0


class AsyncCallWriter:
    """Writes calls to `store` from a background thread, batching concurrent callers into one commit.

    `await writer.add_call(record)` returns once the record is committed (durable), or raises what
    `TrajectoryStore.add_call` would (`DuplicateCallError`, `EpisodeNotFoundError`, ...); one bad record
    never fails the others of its batch. A cancelled `add_call` still writes its record: the call happened.
    Use as `async with AsyncCallWriter(store) as writer:` or call `close()` / `await aclose()`.
    """

    def __init__(self, store: TrajectoryStore, *, max_batch: int = 512):
        self._store = store
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._close_lock = threading.Lock()
        self.stats = WriterStats()
        self._stats_lock = threading.Lock()  # commits are counted from the writer thread and from callers
        self._busy = False  # the writer thread is committing a batch
        self._thread = threading.Thread(target=self._run, name="openforge-call-writer", daemon=True)
        self._thread.start()

    def submit(self, record: CallRecord) -> concurrent.futures.Future:
        """Queue `record`; the future completes when it is committed. Usable from any thread."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._close_lock:
            if self._closed:
                raise StoreClosedError("the call writer is closed")
            self._queue.put((record, future))
        return future

    async def add_call(self, record: CallRecord, *, alone: bool = False) -> None:
        """Store `record`; returns once it is committed. `alone`: the caller knows no other record is on its
        way (one call in flight). Then a small record is committed right here while the writer is idle and
        SQLite's write lock is free: it would have had a batch of its own, and the two thread hops cost more
        than its commit. Otherwise it joins the writer's next batch."""
        small = len(record.request_body or b"") <= _INLINE_BYTES
        if alone and small and self._idle() and self._store.try_add_call(record):
            self._count(1)
            return
        await asyncio.shield(asyncio.wrap_future(self.submit(record)))

    def _idle(self) -> bool:
        with self._close_lock:
            if self._closed:
                raise StoreClosedError("the call writer is closed")
        return not self._busy and self._queue.empty()

    def close(self) -> None:
        """Commit everything queued, then stop the thread. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._thread.join()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> AsyncCallWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- background thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = []
            item = self._queue.get()  # wait for work
            while True:
                if item is _STOP:
                    stopping = True
                    break
                batch.append(item)
                if len(batch) >= self._max_batch:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._busy = True
                try:
                    self._commit(batch)
                finally:
                    self._busy = False

    def _commit(self, batch: list[tuple[CallRecord, concurrent.futures.Future]]) -> None:
        try:
            self._store.add_calls([record for record, _ in batch])
        except Exception:
            # Something in the batch is bad: write one by one so each caller gets its own outcome.
            for record, future in batch:
                try:
                    self._store.add_call(record)
                except Exception as exc:  # handed to the caller, not lost
                    _settle(future, exc)
                else:
                    self._count(1)
                    _settle(future, None)
            return
        self._count(len(batch))
        for _, future in batch:
            _settle(future, None)

    def _count(self, n: int) -> None:
        with self._stats_lock:
            self.stats.records += n
            self.stats.transactions += 1
            self.stats.largest_batch = max(self.stats.largest_batch, n)


def _settle(future: concurrent.futures.Future, exc: BaseException | None) -> None:
    try:
        if exc is None:
            future.set_result(None)
        else:
            future.set_exception(exc)
    except concurrent.futures.InvalidStateError:
        pass  # the submitter cancelled its future; the record was still handled
