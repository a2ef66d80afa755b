"""Request bodies as deltas of the previous call's body.

A harness sends its whole conversation on every call, so call k+1's request body is call k's with a few
messages added in the middle (new turns before the trailing tools/options). Storing each whole makes a long
episode's bodies quadratic in size and compresses megabytes per call. A body is stored instead as

    tag 2 | ref (int32) | prefix (int64) | suffix (int64) | pack(middle)
    meaning  body = body(ref)[:prefix] + middle + body(ref)[len - suffix:]

when that saves enough; otherwise `pack(body)` (tags 0/1, see `codec.py`). Chains of references are capped
at `MAX_BODY_DEPTH` so reading one call never walks far.
"""

from __future__ import annotations

import struct
import threading
from collections import OrderedDict

import numpy as np

from openforge.store.codec import pack, unpack

_DELTA = 2
_HEADER = struct.Struct("<iqq")
MAX_BODY_DEPTH = 32
MIN_SHARED_BYTES = 512  # sharing less is not worth the indirection


def _prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def encode_body(body: bytes, ref: tuple[int, bytes, int] | None) -> tuple[bytes, int]:
    """(blob, depth) for `body`, as a delta of `ref` = (index, body, depth) when that pays."""
    if ref is None or not body:
        return pack(body), 0
    index, base, depth = ref
    if depth + 1 > MAX_BODY_DEPTH:
        return pack(body), 0
    new, old = np.frombuffer(body, np.uint8), np.frombuffer(base, np.uint8)
    prefix = _prefix(new, old)
    room = min(len(new), len(old)) - prefix
    suffix = _prefix(new[::-1][:room], old[::-1][:room]) if room > 0 else 0
    if prefix + suffix < MIN_SHARED_BYTES:
        return pack(body), 0
    middle = body[prefix : len(body) - suffix]
    return bytes((_DELTA,)) + _HEADER.pack(index, prefix, suffix) + pack(middle), depth + 1


def body_reference(blob: bytes) -> int | None:
    """The index of the call whose body `blob` is a delta of (None for a whole body)."""
    if blob and blob[0] == _DELTA:
        return _HEADER.unpack_from(blob, 1)[0]
    return None


def decode_body(blob: bytes, base: bytes | None) -> bytes:
    """Rebuild a body; `base` is the referenced call's body when `body_reference(blob)` is not None."""
    if not blob or blob[0] != _DELTA:
        return unpack(blob)
    _, prefix, suffix = _HEADER.unpack_from(blob, 1)
    if base is None or prefix + suffix > len(base):
        from openforge.store.errors import CorruptRecordError

        raise CorruptRecordError("a request body references a body that is missing or too short")
    middle = unpack(blob[1 + _HEADER.size :])
    return base[:prefix] + middle + base[len(base) - suffix :]


class BodyCache:
    """Thread-safe LRU of (episode_id, index) -> (body, depth) of committed calls, bounded by bytes."""

    def __init__(self, max_bytes: int = 256 << 20):
        self._max = max_bytes
        self._size = 0
        self._items: OrderedDict[tuple[str, int], tuple[bytes, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, episode_id: str, index: int) -> tuple[bytes, int] | None:
        with self._lock:
            item = self._items.get((episode_id, index))
            if item is not None:
                self._items.move_to_end((episode_id, index))
            return item

    def latest_before(self, episode_id: str, index: int, look_back: int = 4) -> tuple[int, bytes, int] | None:
        for j in range(index - 1, max(-1, index - 1 - look_back), -1):
            item = self.get(episode_id, j)
            if item is not None:
                return j, item[0], item[1]
        return None

    def put(self, episode_id: str, index: int, body: bytes, depth: int) -> None:
        if len(body) > self._max:
            return
        with self._lock:
            if (episode_id, index) in self._items:
                return
            self._items[(episode_id, index)] = (body, depth)
            self._size += len(body)
            while self._size > self._max:
                _, (old, _) = self._items.popitem(last=False)
                self._size -= len(old)
