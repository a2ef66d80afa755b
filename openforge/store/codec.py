"""Compact binary encodings: token ids as little-endian int32, logprobs as float32, optional zlib.

Every blob written by the store is self-describing: its first byte says how the rest is encoded, so a
reader never needs a side column and the codec can change per row. An empty payload is stored as b"".
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

ID_DTYPE = np.dtype("<i4")
LOGPROB_DTYPE = np.dtype("<f4")

_RAW = 0
_ZLIB = 1
# Below this size zlib's header costs more than it can win.
_MIN_COMPRESS_BYTES = 64
_ZLIB_LEVEL = 1  # as small as level 6 on token ids, several times faster

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


def ids_array(ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """Token ids as an int32 array; a clear error if an id does not fit in int32."""
    if isinstance(ids, np.ndarray) and ids.dtype == ID_DTYPE:
        return ids
    wide = np.asarray(ids, dtype=np.int64) if len(ids) else np.empty(0, dtype=np.int64)
    if wide.ndim != 1:
        raise ValueError(f"token ids must be a flat list, got an array of shape {wide.shape}")
    if wide.size and (wide.min() < _INT32_MIN or wide.max() > _INT32_MAX):
        raise ValueError("token ids must fit in int32 (the store keeps them as little-endian int32)")
    return wide.astype(ID_DTYPE)


def ids_to_bytes(ids: Sequence[int] | np.ndarray) -> bytes:
    return ids_array(ids).tobytes()


def bytes_to_ids(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=ID_DTYPE)


def logprobs_to_bytes(logprobs: Sequence[float]) -> bytes:
    """Logprobs are stored as float32: python floats come back rounded to float32 precision."""
    return np.asarray(logprobs, dtype=LOGPROB_DTYPE).tobytes() if len(logprobs) else b""


def bytes_to_logprobs(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=LOGPROB_DTYPE)


def pack(data: bytes) -> bytes:
    """Tag `data` with its codec, compressing with zlib only when that makes it smaller."""
    if not data:
        return b""
    if len(data) >= _MIN_COMPRESS_BYTES:
        squeezed = zlib.compress(data, _ZLIB_LEVEL)
        if len(squeezed) < len(data):
            return bytes((_ZLIB,)) + squeezed
    return bytes((_RAW,)) + data


def unpack(blob: bytes) -> bytes:
    """Inverse of `pack`."""
    if not blob:
        return b""
    tag, body = blob[0], memoryview(blob)[1:]
    if tag == _RAW:
        return bytes(body)
    if tag == _ZLIB:
        return zlib.decompress(body)
    from openforge.store.errors import CorruptRecordError

    raise CorruptRecordError(f"unknown blob codec tag {tag} (written by a newer OpenForge?)")


def common_prefix_length(a: np.ndarray, b: np.ndarray) -> int:
    """Number of leading positions where `a` and `b` hold the same token."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n
