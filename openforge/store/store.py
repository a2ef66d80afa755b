"""`TrajectoryStore`: the durable record of one run — episodes, every model call, rewards.

One SQLite file per run directory (`RUN_DIR/trajectories.db`). Every write method returns only after its
transaction has committed, so what it wrote survives the process being killed right after (docs/design.md,
invariant 2). Several processes may open the same run and write concurrently. Open the store *after*
forking: a connection must not cross a fork.

Storage of a call (see `calls.py`, `prompts.py` and `codec.py`): prompt ids prefix-shared with an earlier call of the
episode, output ids as int32 bytes, output logprobs as **float32** bytes — a read returns python floats equal
to the written values rounded to float32 — and request/response bodies as bytes, zlib-compressed when that
makes them smaller. Everything else round-trips exactly.

Reward and outcome live on the episode (`update_episode(..., reward=..., outcome=...)`), since an episode is
graded once; `record_verifier_result` also keeps the verifier's other output in its own table.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import openforge
from openforge.core import CallImage, CallRecord, Episode, EpisodeState, Outcome
from openforge.core.json_types import JSONObject
from openforge.store import queries
from openforge.store.calls import CallTable
from openforge.store.connection import DEFAULT_BUSY_TIMEOUT_S, ConnectionPool, enable_wal, write_transaction
from openforge.store.errors import (
    DuplicateEpisodeError,
    EpisodeNotFoundError,
    StoreError,
)
from openforge.store.queries import CallSummary, EpisodePage, EpisodeQuery, Facets, GroupRow
from openforge.store.rows import (
    EPISODE_COLUMNS,
    UPDATABLE_EPISODE_FIELDS,
    episode_to_row,
    row_to_episode,
    to_json,
)
from openforge.store.schema import check_not_newer, migrate, schema_version

DB_FILENAME = "trajectories.db"
# A read-only reader cannot migrate: it needs the verifier_results table (v2); the summary index (v4) only
# makes it faster.
READONLY_MIN_VERSION = 2

_EPISODE_SELECT = f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes"
_EPISODE_INSERT = (
    f"INSERT INTO episodes ({', '.join(EPISODE_COLUMNS)}) VALUES ({', '.join('?' * len(EPISODE_COLUMNS))})"
)


class TrajectoryStore:
    """Durable store of one run. Thread-safe: each thread uses its own SQLite connection."""

    def __init__(self, run_dir: Path, pool: ConnectionPool):
        """Use `TrajectoryStore.open(run_dir)`."""
        self.run_dir = run_dir
        self.path = Path(pool.path)
        self._pool = pool
        self._calls = CallTable()

    # ---- lifecycle -------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        run_dir: str | os.PathLike[str],
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        readonly: bool = False,
    ) -> TrajectoryStore:
        """Open (creating if needed) `run_dir/trajectories.db`, migrating its schema to the current version.

        Raises `SchemaVersionError` if the file comes from a newer OpenForge. `readonly`: open an existing store
        without writing anything (no migration; every write method fails), e.g. to look at a run that another
        process may still be writing.
        """
        run_dir = Path(run_dir)
        if readonly:
            return cls._open_readonly(run_dir, busy_timeout_s)
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / DB_FILENAME
        pool = ConnectionPool(str(path), busy_timeout_s)
        try:
            conn = pool.get()
            check_not_newer(conn, str(path))  # before touching anything
            enable_wal(conn, busy_timeout_s)
            migrate(conn, str(path))
            if conn.execute("SELECT 1 FROM meta WHERE key = 'created_at'").fetchone() is None:
                with write_transaction(conn):
                    conn.executemany(
                        "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                        [("created_at", json.dumps(time.time())), ("created_by", json.dumps(openforge.__version__))],
                    )
        except BaseException:
            pool.close()
            raise
        return cls(run_dir, pool)

    @classmethod
    def _open_readonly(cls, run_dir: Path, busy_timeout_s: float) -> TrajectoryStore:
        path = run_dir / DB_FILENAME
        if not path.is_file():
            raise FileNotFoundError(f"{run_dir} holds no {DB_FILENAME}: is it a run directory?")
        pool = ConnectionPool(str(path), busy_timeout_s, readonly=True)
        try:
            conn = pool.get()
            check_not_newer(conn, str(path))
            found = schema_version(conn)
            if found < READONLY_MIN_VERSION:
                raise StoreError(
                    f"{path} has schema version {found}, older than a read-only reader can use "
                    f"({READONLY_MIN_VERSION}); open it once with a writer (e.g. `openforge export`) "
                    "to migrate it"
                )
        except BaseException:
            pool.close()
            raise
        return cls(run_dir, pool)

    @property
    def readonly(self) -> bool:
        return self._pool.readonly

    def close(self) -> None:
        """Close every connection of this store (all threads). Pending writes have already committed."""
        self._pool.close()

    def __enter__(self) -> TrajectoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _conn(self) -> sqlite3.Connection:
        return self._pool.get()

    # ---- run metadata ----------------------------------------------------------------------------------

    def set_run_info(self, info: Mapping[str, object]) -> None:
        """Merge `info` into the run's metadata (keys not named are kept). Values must be JSON-serializable."""
        rows = [(str(k), to_json(v, f"run info {k!r}")) for k, v in info.items()]
        conn = self._conn()
        with write_transaction(conn):
            conn.executemany(
                "INSERT INTO run_info (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                rows,
            )

    def get_run_info(self) -> dict[str, Any]:
        """The run's metadata (JSON values; typed Any until its readers narrow what they read, e.g. train/verl)."""
        rows = self._conn().execute("SELECT key, value FROM run_info ORDER BY key").fetchall()
        return {k: json.loads(v) for k, v in rows}

    @property
    def created_at(self) -> float:
        row = self._conn().execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()
        return float(json.loads(row[0]))

    # ---- episodes --------------------------------------------------------------------------------------

    def create_episode(self, episode: Episode) -> Episode:
        """Store a new episode. Raises `DuplicateEpisodeError` if its id or key is taken."""
        conn = self._conn()
        try:
            with write_transaction(conn):
                conn.execute(_EPISODE_INSERT, episode_to_row(episode))
        except sqlite3.IntegrityError as exc:
            # Never echo the key: it is the episode's secret.
            taken = "key" if "episodes.key" in str(exc) else f"id {episode.id!r}"
            raise DuplicateEpisodeError(f"an episode with this {taken} is already stored") from exc
        return episode

    def get_episode(self, episode_id: str) -> Episode | None:
        row = self._conn().execute(f"{_EPISODE_SELECT} WHERE id = ?", (episode_id,)).fetchone()
        return row_to_episode(row) if row else None

    def get_episode_by_key(self, key: str) -> Episode | None:
        """The episode whose secret key is `key` (indexed: the proxy calls this on every request)."""
        row = self._conn().execute(f"{_EPISODE_SELECT} WHERE key = ?", (key,)).fetchone()
        return row_to_episode(row) if row else None

    def update_episode(self, episode_id: str, **fields: object) -> Episode:
        """Change some of `state`, `outcome`, `outcome_reason`, `reward`, `ended_at`, `metadata` (replaced
        whole) and return the updated episode. Values are validated as `Episode` fields."""
        unknown = set(fields) - UPDATABLE_EPISODE_FIELDS
        if unknown:
            raise ValueError(
                f"cannot update episode field(s) {sorted(unknown)}; updatable: {sorted(UPDATABLE_EPISODE_FIELDS)}"
            )
        conn = self._conn()
        with write_transaction(conn):
            row = conn.execute(f"{_EPISODE_SELECT} WHERE id = ?", (episode_id,)).fetchone()
            if row is None:
                raise EpisodeNotFoundError(episode_id)
            updated = Episode.model_validate({**row_to_episode(row).model_dump(), **fields})
            names = sorted(fields)
            values = dict(zip(EPISODE_COLUMNS, episode_to_row(updated)))
            if names:
                conn.execute(
                    f"UPDATE episodes SET {', '.join(f'{n} = ?' for n in names)} WHERE id = ?",
                    [values[n] for n in names] + [episode_id],
                )
        return updated

    def list_episodes(
        self,
        *,
        task: str | None = None,
        harness: str | None = None,
        state: EpisodeState | str | None = None,
        outcome: Outcome | str | None = None,
        limit: int | None = None,
    ) -> list[Episode]:
        """Episodes matching every filter given, oldest first."""
        where, args = [], []
        for column, value in (("task", task), ("harness", harness), ("state", state), ("outcome", outcome)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value.value if hasattr(value, "value") else value)
        sql = _EPISODE_SELECT + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY created_at, id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        return [row_to_episode(r) for r in self._conn().execute(sql, args).fetchall()]

    def count_episodes(self) -> int:
        return int(self._conn().execute("SELECT count(*) FROM episodes").fetchone()[0])

    def record_verifier_result(self, episode_id: str, reward: float | None, details: Mapping[str, object]) -> None:
        """Store what the verifier reported and set the episode's reward, in one transaction."""
        conn = self._conn()
        with write_transaction(conn):
            if conn.execute("UPDATE episodes SET reward = ? WHERE id = ?", (reward, episode_id)).rowcount == 0:
                raise EpisodeNotFoundError(episode_id)
            conn.execute(
                "INSERT OR REPLACE INTO verifier_results (episode_id, reward, details, recorded_at) "
                "VALUES (?, ?, ?, ?)",
                (episode_id, reward, to_json(dict(details), "verifier details"), time.time()),
            )

    def get_verifier_result(self, episode_id: str) -> JSONObject | None:
        """`{"reward", "details", "recorded_at"}` as recorded, or None."""
        row = (
            self._conn()
            .execute("SELECT reward, details, recorded_at FROM verifier_results WHERE episode_id = ?", (episode_id,))
            .fetchone()
        )
        if row is None:
            return None
        return {"reward": row[0], "details": json.loads(row[1]), "recorded_at": row[2]}

    # ---- calls (encoded against earlier calls of their episode: `calls.py`) --------------------------------

    def add_call(self, record: CallRecord) -> None:
        """Store one call; durable when this returns. Raises `DuplicateCallError` if (episode_id, index) is
        already stored and `EpisodeNotFoundError` if the episode does not exist."""
        self.add_calls([record])

    def add_calls(self, records: Iterable[CallRecord]) -> None:
        """Store several calls in one transaction: all are stored, or (on error) none."""
        self._calls.add(self._conn(), records)

    def try_add_call(self, record: CallRecord) -> bool:
        """Store one call if SQLite's write lock is free now; False, with nothing written, when another
        writer holds it (this never waits for the lock: a caller on an event loop must not block on it)."""
        conn = self._conn()
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            self._calls.add(conn, [record])
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            if conn.in_transaction:  # refused at COMMIT rather than at BEGIN: the lock must not stay held
                conn.execute("ROLLBACK")
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self._pool.busy_timeout_s * 1000)}")
        return True

    def get_call(self, episode_id: str, index: int) -> CallRecord | None:
        return self._calls.get(self._conn(), episode_id, index)

    def list_calls(self, episode_id: str) -> list[CallRecord]:
        """Every call of the episode, ordered by index."""
        return self._calls.of_episode(self._conn(), episode_id)

    def iter_calls(self) -> Iterator[CallRecord]:
        """Every call of the run: episode by episode (oldest first), each ordered by index. One episode is in
        memory at a time."""
        episode_ids = [r[0] for r in self._conn().execute("SELECT id FROM episodes ORDER BY created_at, id").fetchall()]
        for episode_id in episode_ids:
            yield from self.list_calls(episode_id)

    def get_image(self, sha256: str) -> tuple[str, bytes] | None:
        """(media type, bytes) of an image some call sent, by its sha256; None when none did."""
        return self._calls.images.get(self._conn(), sha256)

    def episode_images(self, episode_id: str) -> dict[int, list[CallImage]]:
        """call index → the images its request held, in body order (calls without images left out); read from
        the image rows alone, no request body decoded."""
        return self._calls.images.of_episode(self._conn(), episode_id)

    def count_calls(self, episode_id: str | None = None) -> int:
        conn = self._conn()
        if episode_id is None:
            return int(conn.execute("SELECT count(*) FROM calls").fetchone()[0])
        return int(conn.execute("SELECT count(*) FROM calls WHERE episode_id = ?", (episode_id,)).fetchone()[0])

    def call_spans(self, episode_id: str) -> list[tuple[float, float | None]]:
        """(started_at, finished_at) of the episode's calls, in order: their timing without decoding them."""
        return [
            (float(a), None if b is None else float(b))
            for a, b in self._conn().execute(
                "SELECT started_at, finished_at FROM calls WHERE episode_id = ? ORDER BY call_index", (episode_id,)
            )
        ]

    # ---- read-only queries for readers that page through a run (see `queries.py`) ----------------------

    def query_episodes(self, query: EpisodeQuery) -> EpisodePage:
        """One page of episodes matching `query`, each with its call summary and flags, and the total count."""
        return queries.query_episodes(self._conn(), query)

    def call_summaries(self, episode_ids: list[str]) -> dict[str, CallSummary]:
        return queries.call_summaries(self._conn(), episode_ids)

    def episode_flags(self, episode_id: str) -> tuple[str, ...]:
        return queries.episode_flags(self._conn(), episode_id)

    def facets(self) -> Facets:
        """The harnesses, outcomes and training steps present in the run."""
        return queries.facets(self._conn())

    def final_episodes(self) -> list[Episode]:
        """The episodes that count, oldest first: ended, and not an attempt the orchestrator retried (the one rule,
        `openforge.store.final`)."""
        return queries.final_episodes(self._conn())

    def count_unfinished(self) -> int:
        """Episodes with no outcome yet (running, or cut short before grading): never final."""
        return queries.count_unfinished(self._conn())

    def final_results(self) -> list[tuple[str | None, str | None, str | None, str | None, float | None]]:
        """(task, harness, outcome, outcome_reason, reward) of every final episode."""
        return queries.final_results(self._conn())

    def query_groups(
        self, step: int | None = None, limit: int = 50, offset: int = 0, task: str | None = None
    ) -> tuple[list[GroupRow], int]:
        """A page of (step, task, harness) groups of final episodes, and how many there are."""
        return queries.query_groups(self._conn(), step, limit, offset, task)

    def group_episodes(self, step: int, task: str | None, harness: str | None) -> list[Episode]:
        """The final episodes of one (step, task, harness) group."""
        return queries.group_episodes(self._conn(), step, task, harness)

    # ---- maintenance -----------------------------------------------------------------------------------

    def integrity_check(self) -> str:
        """SQLite's `PRAGMA integrity_check`: "ok" when the file is sound."""
        rows = self._conn().execute("PRAGMA integrity_check").fetchall()
        return "\n".join(r[0] for r in rows)

    def checkpoint(self) -> None:
        """Fold the WAL into the main file (e.g. before copying the run directory)."""
        self._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
