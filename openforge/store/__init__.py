"""Durable SQLite trajectory store: one `trajectories.db` per run directory (see `store.py`).

with TrajectoryStore.open(run_dir) as store:
    store.create_episode(episode)
    store.add_call(call)            # durable when it returns
    calls = store.list_calls(episode.id)

async with AsyncCallWriter(store) as writer:   # group commit for asyncio servers
    await writer.add_call(call)

export_calls(store, "calls.parquet", format="parquet")

with TrajectoryStore.open(run_dir, readonly=True) as store:      # a reader: nothing is written
    page = store.query_episodes(EpisodeQuery(sort="tokens", descending=True, limit=50))
    counted = store.final_episodes()  # the episodes that count (`final.py`: the one rule)

for store_dir in find_stores(run_dir): ...  # every store of a run, whatever its layout
"""

from openforge.store.discover import find_stores
from openforge.store.errors import (
    CorruptRecordError,
    DuplicateCallError,
    DuplicateEpisodeError,
    EpisodeNotFoundError,
    NotARunError,
    SchemaVersionError,
    StoreClosedError,
    StoreError,
)
from openforge.store.export import export_calls
from openforge.store.final import FINAL_SQL, is_final, is_retried
from openforge.store.queries import CallSummary, EpisodePage, EpisodeQuery, EpisodeRow, Facets, GroupRow
from openforge.store.schema import LATEST_VERSION as SCHEMA_VERSION
from openforge.store.store import DB_FILENAME, TrajectoryStore
from openforge.store.writer import AsyncCallWriter

__all__ = [
    "DB_FILENAME",
    "FINAL_SQL",
    "SCHEMA_VERSION",
    "AsyncCallWriter",
    "CallSummary",
    "EpisodePage",
    "EpisodeQuery",
    "EpisodeRow",
    "Facets",
    "GroupRow",
    "CorruptRecordError",
    "DuplicateCallError",
    "DuplicateEpisodeError",
    "EpisodeNotFoundError",
    "NotARunError",
    "SchemaVersionError",
    "StoreClosedError",
    "StoreError",
    "TrajectoryStore",
    "export_calls",
    "find_stores",
    "is_final",
    "is_retried",
]
