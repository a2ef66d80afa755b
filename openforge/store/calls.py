"""`CallTable`: how calls are written to and read from the `calls` table of one store.

A call's prompt is stored as a reference to an earlier call of its episode plus the new tail (`prompts.py`), and
its request body, its images cut out and kept once per hash (`images.py`), as a delta of an earlier call's body
(`bodies.py`). Writing therefore looks at the calls stored before it, and reading follows those references back;
both keep the recent sequences, bodies and images in caches so that a growing conversation is neither re-encoded
nor re-decoded from its start. `TrajectoryStore` owns one `CallTable` and passes it the connection of the calling
thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import numpy as np

from openforge.core import CallImage, CallRecord
from openforge.store.bodies import BodyCache, body_reference, decode_body
from openforge.store.connection import write_transaction
from openforge.store.errors import CorruptRecordError, DuplicateCallError, EpisodeNotFoundError
from openforge.store.images import ImageTable, join_body, split_body
from openforge.store.prompts import CANDIDATE_CALLS, Candidate, SequenceCache, decode_prompt, encode_prompt
from openforge.store.rows import CALL_COLUMNS, EncodedCall, decode_output, row_to_call

_CALL_SELECT = f"SELECT {', '.join(CALL_COLUMNS)} FROM calls"
_CALL_INSERT = f"INSERT INTO calls ({', '.join(CALL_COLUMNS)}) VALUES ({', '.join('?' * len(CALL_COLUMNS))})"
_COL = {name: i for i, name in enumerate(CALL_COLUMNS)}
HINT_SAMPLES = 64  # ids of a continuity hint's base compared with the prompt


class CallTable:
    """Encodes calls against the earlier calls of their episode, and decodes them back. Thread-safe: the
    caches are, and every method takes the caller's connection."""

    def __init__(self) -> None:
        self._sequences = SequenceCache()
        self._bodies = BodyCache()  # bodies as stored: their images cut out
        self.images = ImageTable()

    # ---- writing ---------------------------------------------------------------------------------------

    def add(self, conn: sqlite3.Connection, records: Iterable[CallRecord]) -> None:
        """Store `records` in one transaction: all are stored, or (on error) none."""
        # images are cut out and compression happens here, outside the write lock
        splits = [(r, split_body(r, self.images.stored_text)) for r in records]
        bases = [self._prompt_base(r) for r, _ in splits]
        encoded = [
            EncodedCall(r, self._bodies.latest_before(r.episode_id, r.index), base, split.body)
            for (r, split), base in zip(splits, bases)
        ]
        if not encoded:
            return
        # Encode every prompt before taking the write lock, so that other writers wait only for the INSERTs.
        # A reference chosen now stays valid: stored calls are never changed or deleted.
        batch: dict[str, dict[int, Candidate]] = {}
        rows = []
        for call, base in zip(encoded, bases):
            rec = call.record
            in_batch = batch.setdefault(rec.episode_id, {})
            extends = rec.metadata["extends_call"] if base is not None else None  # checked by `_prompt_base`
            prompt = encode_prompt(call.prompt, self._candidates(conn, rec.episode_id, rec.index, in_batch), extends)
            in_batch[rec.index] = Candidate(rec.index, call.sequence, prompt.depth)
            rows.append(call.row(prompt))
        with write_transaction(conn):
            for call, row, (_, split) in zip(encoded, rows, splits):
                try:
                    conn.execute(_CALL_INSERT, row)
                except sqlite3.IntegrityError as exc:
                    if "FOREIGN KEY" in str(exc):
                        raise EpisodeNotFoundError(call.record.episode_id) from exc
                    if "UNIQUE" in str(exc):
                        raise DuplicateCallError(call.record.episode_id, call.record.index) from exc
                    raise
                self.images.insert(conn, call.record, split)
        # Only committed calls may enter the caches.
        for episode_id, calls in batch.items():
            for cand in calls.values():
                self._sequences.put(episode_id, cand.index, cand.sequence)
        for call in encoded:
            self._bodies.put(call.record.episode_id, call.record.index, call.stored_body, call.body_depth)
        for _, split in splits:
            self.images.remember(split.texts)

    def _prompt_base(self, record: CallRecord) -> np.ndarray | None:
        """The ids `record`'s prompt is declared to start with (the proxy's continuity hint in its metadata:
        `extends_call` k and `reused_prompt_tokens` n = call k's prompt + output), when cached and consistent;
        then only the new tail of the prompt needs converting."""
        k, n = record.metadata.get("extends_call"), record.metadata.get("reused_prompt_tokens")
        if not isinstance(k, int) or not isinstance(n, int) or n <= 0 or n > len(record.prompt_ids):
            return None
        base = self._sequences.get(record.episode_id, k)
        if base is None or len(base) != n:
            return None
        # a sample of the ids, the first and last included (the whole comparison costs more than storing the
        # call at 100k tokens): a wrong hint from a bug in continuity would store a wrong prompt
        ids = record.prompt_ids
        if any(base[i] != ids[i] for i in (*range(0, n, max(1, n // HINT_SAMPLES)), n - 1)):
            return None
        return base

    def _candidates(
        self, conn: sqlite3.Connection, episode_id: str, index: int, in_batch: dict[int, Candidate]
    ) -> list[Candidate]:
        """The latest calls of the episode before `index` (stored, or earlier in the same batch)."""
        stored = conn.execute(
            "SELECT call_index, prompt_depth FROM calls WHERE episode_id = ? AND call_index < ? "
            "ORDER BY call_index DESC LIMIT ?",
            (episode_id, index, CANDIDATE_CALLS),
        ).fetchall()
        depths = {i: d for i, d in stored}
        depths.update({i: c.depth for i, c in in_batch.items() if i < index})
        out = []
        for cand_index in sorted(depths, reverse=True)[:CANDIDATE_CALLS]:
            cand = in_batch.get(cand_index)
            if cand is None:
                cand = Candidate(cand_index, self._sequence(conn, episode_id, cand_index), depths[cand_index])
            out.append(cand)
        return out

    # ---- reading ---------------------------------------------------------------------------------------

    def get(self, conn: sqlite3.Connection, episode_id: str, index: int) -> CallRecord | None:
        row = conn.execute(f"{_CALL_SELECT} WHERE episode_id = ? AND call_index = ?", (episode_id, index)).fetchone()
        if row is None:
            return None
        ref = row[_COL["prompt_ref"]]
        base = self._sequence(conn, episode_id, ref) if ref is not None else None
        images = self.images.of_call(conn, episode_id, index)
        stored = self._request_body(conn, episode_id, row[_COL["request_body"]])
        body = join_body(stored, images, self.images.encoder(conn))
        return self._decode_row(row, base, body, images)[0]

    def of_episode(self, conn: sqlite3.Connection, episode_id: str) -> list[CallRecord]:
        """Every call of the episode, ordered by index."""
        rows = conn.execute(f"{_CALL_SELECT} WHERE episode_id = ? ORDER BY call_index", (episode_id,)).fetchall()
        sequences: dict[int, np.ndarray] = {}  # a prompt only references a lower index: already decoded
        bodies: dict[int, bytes] = {}  # likewise request bodies (as stored)
        images = self.images.of_episode(conn, episode_id)
        encoded = self.images.encoder(conn)
        calls = []
        for row in rows:
            ref = row[_COL["prompt_ref"]]
            base = None
            if ref is not None:
                base = sequences.get(ref)
                if base is None:
                    index = row[_COL["call_index"]]
                    raise CorruptRecordError(f"call {index} of episode {episode_id!r} references missing call {ref}")
            blob = row[_COL["request_body"]]
            body_ref = body_reference(blob)
            if body_ref is not None and body_ref not in bodies:
                raise CorruptRecordError(
                    f"call {row[_COL['call_index']]} of episode {episode_id!r} "
                    f"references the missing body of call {body_ref}"
                )
            stored = decode_body(blob, bodies.get(body_ref) if body_ref is not None else None)
            index = row[_COL["call_index"]]
            call_images = images.get(index, [])
            body = join_body(stored, call_images, encoded)
            call, sequences[index] = self._decode_row(row, base, body, call_images)
            bodies[call.index] = stored
            calls.append(call)
        return calls

    def _sequence(self, conn: sqlite3.Connection, episode_id: str, index: int) -> np.ndarray:
        """Prompt + output ids of a committed call, following prompt references back as far as needed."""
        chain = []
        at: int | None = index
        base = None
        while at is not None:
            base = self._sequences.get(episode_id, at)
            if base is not None:
                break
            row = conn.execute(
                "SELECT call_index, prompt_ref, prompt_prefix_len, prompt_tail, output_ids FROM calls "
                "WHERE episode_id = ? AND call_index = ?",
                (episode_id, at),
            ).fetchone()
            if row is None:
                raise CorruptRecordError(f"call {at} of episode {episode_id!r} is referenced but missing")
            chain.append(row)
            at = row[1]
        for call_index, ref, prefix_len, tail, output_blob in reversed(chain):
            prompt = decode_prompt(base if ref is not None else None, prefix_len, tail)
            base = np.concatenate([prompt, decode_output(output_blob)])
            self._sequences.put(episode_id, call_index, base)
        assert base is not None  # the loop ran at least once: `at` starts as an index
        return base

    def _request_body(self, conn: sqlite3.Connection, episode_id: str, blob: bytes) -> bytes:
        """A request body, following delta references back through earlier calls as needed."""
        ref = body_reference(blob)
        if ref is None:
            return decode_body(blob, None)
        cached = self._bodies.get(episode_id, ref)
        if cached is not None:
            return decode_body(blob, cached[0])
        row = conn.execute(
            "SELECT request_body FROM calls WHERE episode_id = ? AND call_index = ?", (episode_id, ref)
        ).fetchone()
        if row is None:
            raise CorruptRecordError(f"a request body of episode {episode_id!r} references missing call {ref}")
        return decode_body(blob, self._request_body(conn, episode_id, row[0]))

    def _decode_row(
        self, row: tuple, base: np.ndarray | None, request_body: bytes, images: list[CallImage]
    ) -> tuple[CallRecord, np.ndarray]:
        """The call of a `calls` row, and its prompt + output sequence. `base` is the sequence of the call
        its prompt references (None when the prompt is stored whole)."""
        prompt = decode_prompt(base, row[_COL["prompt_prefix_len"]], row[_COL["prompt_tail"]])
        if len(prompt) != row[_COL["prompt_len"]]:
            raise CorruptRecordError(
                f"call {row[_COL['call_index']]} of episode {row[_COL['episode_id']]!r}: decoded prompt has "
                f"{len(prompt)} tokens, {row[_COL['prompt_len']]} were stored"
            )
        output = decode_output(row[_COL["output_ids"]])
        return row_to_call(row, prompt, output, request_body, images), np.concatenate([prompt, output])
