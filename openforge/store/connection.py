"""SQLite connections configured for the store: WAL, synchronous=NORMAL, a busy timeout, one per thread.

Why these settings: in WAL mode a COMMIT appends to the -wal file before returning, so a committed write
survives the writing process being killed (synchronous=NORMAL skips the fsync that only power loss needs).
Readers never block writers. Writers from several processes queue on SQLite's write lock; `BEGIN
IMMEDIATE` takes that lock up front, so a transaction never fails half-way on a lock upgrade, and the busy
timeout makes waiting writers retry instead of failing.

sqlite3 connections must not be shared between threads mid-use, so each thread gets its own connection
(created lazily); `close()` closes all of them.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator

from openforge.store.errors import StoreClosedError

DEFAULT_BUSY_TIMEOUT_S = 60.0


def connect(path: str, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, readonly: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit) with the store's pragmas. `readonly`: SQLite
    refuses every write on it (a viewer of a run that another process may be writing)."""
    if readonly:
        uri = f"file:{urllib.parse.quote(path)}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    else:
        conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def enable_wal(conn: sqlite3.Connection, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
    """Switch the file to WAL (persistent). Retried: switching needs a moment of exclusive access, and
    SQLite may report "locked" without consulting the busy handler when several processes open a new file."""
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
            continue
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"could not switch the database to WAL mode (got {mode!r})")
        return


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT; rolled back if the body raises. Durable once the block exits."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class ConnectionPool:
    """One connection per thread, all to the same file."""

    def __init__(self, path: str, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, readonly: bool = False):
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.readonly = readonly
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def get(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and not self._closed:
            return conn
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"the trajectory store at {self.path} is closed")
            conn = connect(self.path, self.busy_timeout_s, self.readonly)
            self._all.append(conn)
        self._local.conn = conn
        return conn

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
