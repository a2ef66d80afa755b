"""The store's SQL schema as an ordered list of migrations.

The schema version lives in `PRAGMA user_version`. Opening a database applies, in one write transaction,
every migration above its version; a database from a newer version is refused untouched. To change the
schema, append a migration; never edit one that has shipped.

Where things live:
- `meta`: facts about the file itself (created_at, the OpenForge version that created it).
- `run_info`: the run's own metadata (config, ...), one JSON value per key.
- `episodes`: every `Episode` field. The reward and outcome live here, because an episode is graded once
  and every reader (assembler, evaluation, export) wants them next to the episode.
- `verifier_results` (v2): what the verifier wrote besides the reward (reward.json's other keys, log tail),
  kept apart so that listing episodes never drags it along.
- `calls`: every `CallRecord` field; prompts prefix-shared (see `prompts.py`), arrays and bodies as blobs.
- `images` (v5): each image a harness sent, once per sha256; `call_images` (v5): a call's `CallRecord.images`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from openforge.store.errors import SchemaVersionError


@dataclass(frozen=True)
class Migration:
    version: int  # the schema version after applying it
    description: str
    statements: Sequence[str]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "run metadata, episodes, calls",
        (
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            "CREATE TABLE run_info (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            """CREATE TABLE episodes (
                id TEXT PRIMARY KEY,
                key TEXT NOT NULL UNIQUE,
                task TEXT,
                harness TEXT,
                attempt INTEGER NOT NULL,
                sample INTEGER NOT NULL,
                state TEXT NOT NULL,
                outcome TEXT,
                outcome_reason TEXT,
                reward REAL,
                created_at REAL NOT NULL,
                ended_at REAL,
                metadata TEXT NOT NULL
            )""",
            "CREATE INDEX episodes_by_task ON episodes (task, harness)",
            "CREATE INDEX episodes_by_created ON episodes (created_at, id)",
            """CREATE TABLE calls (
                episode_id TEXT NOT NULL REFERENCES episodes (id),
                call_index INTEGER NOT NULL,
                prompt_len INTEGER NOT NULL,
                prompt_ref INTEGER,
                prompt_prefix_len INTEGER NOT NULL,
                prompt_depth INTEGER NOT NULL,
                prompt_tail BLOB NOT NULL,
                output_len INTEGER NOT NULL,
                output_ids BLOB NOT NULL,
                output_logprobs BLOB NOT NULL,
                sampling TEXT NOT NULL,
                finish_reason TEXT NOT NULL,
                policy_version INTEGER NOT NULL,
                started_at REAL NOT NULL,
                finished_at REAL,
                timings TEXT NOT NULL,
                dialect TEXT NOT NULL,
                side_call INTEGER NOT NULL,
                segment INTEGER NOT NULL,
                break_reason TEXT,
                call_error TEXT,
                parse_error TEXT,
                request_body BLOB NOT NULL,
                response_body BLOB NOT NULL,
                metadata TEXT NOT NULL,
                PRIMARY KEY (episode_id, call_index)
            )""",
        ),
    ),
    Migration(
        2,
        "verifier results",
        (
            """CREATE TABLE verifier_results (
                episode_id TEXT PRIMARY KEY REFERENCES episodes (id),
                reward REAL,
                details TEXT NOT NULL,
                recorded_at REAL NOT NULL
            )""",
        ),
    ),
)

MIGRATIONS += (
    # No table changes: request bodies may now be stored as deltas of an earlier call's body (blob tag 2,
    # see bodies.py). The version bump makes older OpenForge versions refuse files they could not read.
    Migration(3, "request bodies as deltas of the previous call's body", ()),
)

MIGRATIONS += (
    # Readers that summarise many episodes at once (the viewer's episode table: calls, tokens, breaks and faults
    # per episode, sortable over a whole run) read this index alone instead of every call row with its blobs.
    Migration(
        4,
        "covering index of per-call summaries",
        (
            "CREATE INDEX calls_summary ON calls "
            "(episode_id, output_len, prompt_len, side_call, break_reason, call_error, parse_error)",
        ),
    ),
)

MIGRATIONS += (
    # Images a harness sends (screenshots) are kept once per content hash, however many calls send them again:
    # `images` holds the bytes, `call_images` which images each call's request held and where their base64
    # text stood in its body (the body is stored without it; `images.py`). An image whose text could not be cut
    # out (not in the body verbatim) stays in the body and has no `images` row: `sha256` is no foreign key.
    Migration(
        5,
        "images once per content hash, referenced by the calls that sent them",
        (
            """CREATE TABLE images (
                sha256 TEXT PRIMARY KEY,
                media_type TEXT NOT NULL,
                size INTEGER NOT NULL,
                data BLOB NOT NULL
            )""",
            """CREATE TABLE call_images (
                episode_id TEXT NOT NULL,
                call_index INTEGER NOT NULL,
                position INTEGER NOT NULL,
                sha256 TEXT,
                media_type TEXT,
                size INTEGER NOT NULL,
                url TEXT,
                span_offset INTEGER,
                span_length INTEGER,
                PRIMARY KEY (episode_id, call_index, position),
                FOREIGN KEY (episode_id, call_index) REFERENCES calls (episode_id, call_index)
            )""",
            "CREATE INDEX call_images_by_hash ON call_images (sha256)",
        ),
    ),
)
IMAGES_VERSION = 5  # a file older than this has no image tables: its calls read as holding no images

LATEST_VERSION = MIGRATIONS[-1].version


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def check_not_newer(conn: sqlite3.Connection, path: str) -> None:
    found = schema_version(conn)
    if found > LATEST_VERSION:
        raise SchemaVersionError(path, found, LATEST_VERSION)


def migrate(conn: sqlite3.Connection, path: str, target: int = LATEST_VERSION) -> int:
    """Bring the schema up to `target` and return the version found before.

    Runs in one IMMEDIATE transaction and re-reads the version inside it, so processes opening a new run
    at the same moment apply each migration exactly once. `conn` must be in autocommit mode.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = schema_version(conn)
        if found > LATEST_VERSION:
            raise SchemaVersionError(path, found, LATEST_VERSION)
        for migration in MIGRATIONS:
            if found < migration.version <= target:
                for statement in migration.statements:
                    conn.execute(statement)
                # PRAGMA takes no parameters; the version is our own int.
                conn.execute(f"PRAGMA user_version = {int(migration.version)}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return found
