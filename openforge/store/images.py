"""Images kept once per content hash: a call's request body is stored without its images' base64 text and rebuilt
exactly when read.

A screenshot-driven harness sends its whole conversation, screenshots included, on every call. Stored whole, each
screenshot would be written again with every later call (the body deltas of `bodies.py` share a prefix and a
suffix, and a new screenshot sits in the middle). So the bytes of each image go into the `images` table once per
sha256, a call's `call_images` rows say which images its request held and where their base64 text stood in the
body (`CallImage.span`), and the body is stored with those spans cut out. Reading puts the base64 of the stored
bytes back at the same offsets: the body comes back byte for byte (a span is only cut when its text is the
canonical base64 of the bytes, which `split_body` checks).
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from openforge.core import CallImage, CallRecord
from openforge.store.errors import CorruptRecordError
from openforge.store.schema import IMAGES_VERSION, schema_version

_INSERT_IMAGE = "INSERT OR IGNORE INTO images (sha256, media_type, size, data) VALUES (?, ?, ?, ?)"
_INSERT_CALL_IMAGE = (
    "INSERT INTO call_images (episode_id, call_index, position, sha256, media_type, size, url, span_offset, "
    "span_length) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_CALL_IMAGE_COLUMNS = "call_index, sha256, media_type, size, url, span_offset, span_length"


@dataclass
class SplitBody:
    """A call's request body without its images' base64 text (`body`); the images not known to be stored yet
    (`data`), and the base64 text of each image it held (`texts`)."""

    body: bytes
    data: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # sha256 → (media type, bytes)
    texts: dict[str, bytes] = field(default_factory=dict)  # sha256 → base64 text


def split_body(record: CallRecord, stored: Callable[[str], bytes | None] = lambda sha256: None) -> SplitBody:
    """Cut the spans of `record.images` out of its request body; a ValueError when a span does not hold the
    canonical base64 text of an image with that hash (the body could not be rebuilt from the stored bytes).
    `stored(sha256)`: the base64 text of an image already stored, if known; a span equal to it needs no decoding
    (a screenshot a harness sends again with every call is checked by one comparison)."""
    body = record.request_body
    split = SplitBody(body)
    if not any(image.span for image in record.images):
        return split
    kept: list[bytes] = []
    cursor = 0
    for image in record.images:
        if image.span is None:
            continue
        offset, length = image.span
        where = f"call {record.index} of episode {record.episode_id!r}: image span {image.span}"
        if image.sha256 is None or image.media_type is None or offset < cursor or offset + length > len(body):
            raise ValueError(f"{where} needs a hash and a media type, in order and inside the request body")
        text = body[offset : offset + length]
        if stored(image.sha256) != text:
            try:
                decoded = base64.b64decode(text, validate=True)
            except ValueError:
                raise ValueError(f"{where} does not hold base64 text") from None
            if hashlib.sha256(decoded).hexdigest() != image.sha256 or base64.b64encode(decoded) != text:
                raise ValueError(f"{where} does not hold the canonical base64 of image {image.sha256}")
            split.data[image.sha256] = (image.media_type, decoded)
        split.texts[image.sha256] = text
        kept.append(body[cursor:offset])
        cursor = offset + length
    kept.append(body[cursor:])
    split.body = b"".join(kept)
    return split


def join_body(stored: bytes, images: list[CallImage], encoded: Callable[[str], bytes]) -> bytes:
    """The request body as received: `stored` with the base64 text of each image that has a span put back
    (`encoded(sha256)`)."""
    pieces: list[bytes] = []
    cursor = removed = 0
    for image in images:
        if image.span is None or image.sha256 is None:
            continue
        offset, length = image.span
        at = offset - removed  # where the span was cut from the stored body
        pieces += [stored[cursor:at], encoded(image.sha256)]
        cursor, removed = at, removed + length
    pieces.append(stored[cursor:])
    return b"".join(pieces)


class ImageTable:
    """The `images` and `call_images` tables of one store, and the base64 text of recently stored images (bounded
    by bytes; thread-safe). A file older than the tables (open read-only) holds no image rows; it is looked at
    again on each read, since a writer may migrate it meanwhile."""

    def __init__(self, max_cached_bytes: int = 64 << 20) -> None:
        self._enabled = False  # known to be there (checked on the first read)
        self._texts: OrderedDict[str, bytes] = OrderedDict()
        self._cached_bytes = 0
        self._max_cached_bytes = max_cached_bytes
        self._lock = threading.Lock()

    def _present(self, conn: sqlite3.Connection) -> bool:
        if not self._enabled:
            self._enabled = schema_version(conn) >= IMAGES_VERSION
        return self._enabled

    # ---- the cache of stored images' base64 text ---------------------------------------------------------

    def stored_text(self, sha256: str) -> bytes | None:
        """The base64 text of an image known to be stored (committed), if cached."""
        with self._lock:
            text = self._texts.get(sha256)
            if text is not None:
                self._texts.move_to_end(sha256)
            return text

    def remember(self, texts: dict[str, bytes]) -> None:
        """Cache the base64 text of stored images (call only once they are committed)."""
        with self._lock:
            for sha256, text in texts.items():
                if sha256 in self._texts or len(text) > self._max_cached_bytes:
                    continue
                self._texts[sha256] = text
                self._cached_bytes += len(text)
            while self._cached_bytes > self._max_cached_bytes:
                _, old = self._texts.popitem(last=False)
                self._cached_bytes -= len(old)

    # ---- rows --------------------------------------------------------------------------------------------

    def insert(self, conn: sqlite3.Connection, record: CallRecord, split: SplitBody) -> None:
        """Inside the caller's write transaction: the images not stored yet, and the call's image rows."""
        if not record.images:
            return
        conn.executemany(_INSERT_IMAGE, [(sha, media, len(data), data) for sha, (media, data) in split.data.items()])
        conn.executemany(
            _INSERT_CALL_IMAGE,
            [
                (
                    record.episode_id,
                    record.index,
                    position,
                    image.sha256,
                    image.media_type,
                    image.size,
                    image.url,
                    *(image.span or (None, None)),
                )
                for position, image in enumerate(record.images)
            ],
        )

    def of_call(self, conn: sqlite3.Connection, episode_id: str, index: int) -> list[CallImage]:
        return self.of_episode(conn, episode_id, index).get(index, [])

    def of_episode(
        self, conn: sqlite3.Connection, episode_id: str, index: int | None = None
    ) -> dict[int, list[CallImage]]:
        """call index → its images in body order (one call's when `index` is given)."""
        if not self._present(conn):
            return {}
        sql = f"SELECT {_CALL_IMAGE_COLUMNS} FROM call_images WHERE episode_id = ?"
        args: tuple = (episode_id,)
        if index is not None:
            sql, args = sql + " AND call_index = ?", (episode_id, index)
        out: dict[int, list[CallImage]] = {}
        for call_index, sha, media, size, url, offset, length in conn.execute(
            sql + " ORDER BY call_index, position", args
        ):
            span = (offset, length) if offset is not None else None
            image = CallImage(sha256=sha, media_type=media, size=size, url=url, span=span)
            out.setdefault(call_index, []).append(image)
        return out

    def get(self, conn: sqlite3.Connection, sha256: str) -> tuple[str, bytes] | None:
        """(media type, bytes) of a stored image."""
        if not self._present(conn):
            return None
        row = conn.execute("SELECT media_type, data FROM images WHERE sha256 = ?", (sha256,)).fetchone()
        return (row[0], bytes(row[1])) if row else None

    def encoder(self, conn: sqlite3.Connection) -> Callable[[str], bytes]:
        """`sha256 → base64 text` of stored images, from the cache or looked up and encoded once (a screenshot
        recurs in every later call of its episode)."""

        def encoded(sha256: str) -> bytes:
            text = self.stored_text(sha256)
            if text is None:
                found = self.get(conn, sha256)
                if found is None:
                    raise CorruptRecordError(f"a request body references image {sha256}, which is not stored")
                text = base64.b64encode(found[1])
                self.remember({sha256: text})
            return text

        return encoded
