"""Prefix sharing for prompt token ids.

Within an episode, call k+1's prompt usually starts with call k's prompt followed by call k's output (the
harness sends the conversation back with one more turn). Storing every prompt in full would make a run's
size quadratic in its length, so a prompt is stored as

    (ref, prefix_len, tail)  meaning  prompt = sequence(ref)[:prefix_len] + tail

where `sequence(ref)` is the prompt + output of an earlier call `ref` of the same episode, and `tail` is
packed int32 ids (zlib when it helps). A prompt that shares too little with any recent call (the first call,
a side call, a continuity break) is stored whole: `ref` is None and `prefix_len` is 0.

Reading a prompt follows the chain of refs back to a whole prompt; `depth` counts the hops and is capped at
`MAX_CHAIN_DEPTH` (then a whole prompt is stored again) so that reading one call never walks far.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from openforge.store.codec import bytes_to_ids, common_prefix_length, ids_to_bytes, pack, unpack

# How many earlier calls of the episode to consider as a reference: more than one, so that a side call
# (title generation, a sub-agent) between two main calls does not force a whole prompt.
CANDIDATE_CALLS = 4
# Sharing fewer tokens than this is not worth the indirection.
MIN_SHARED_TOKENS = 16
MAX_CHAIN_DEPTH = 64


@dataclass(frozen=True)
class Candidate:
    """An earlier call that a prompt may reference."""

    index: int
    sequence: np.ndarray  # its prompt ids followed by its output ids
    depth: int  # hops from its prompt to a whole stored prompt


@dataclass(frozen=True)
class EncodedPrompt:
    ref: int | None
    prefix_len: int
    tail: bytes  # packed int32 ids
    length: int
    depth: int


def encode_prompt(prompt: np.ndarray, candidates: list[Candidate], extends: int | None = None) -> EncodedPrompt:
    """Pick the candidate sharing the longest prefix with `prompt` and store only the rest. `extends`: the index
    of a candidate whose whole sequence `prompt` is known to start with (the proxy's continuity hint, checked
    by the caller); it is taken without comparing the others (at 100k tokens each comparison costs more than
    the rest of storing the call)."""
    hinted = next((c for c in candidates if c.index == extends), None) if extends is not None else None
    if hinted is not None and hinted.depth + 1 <= MAX_CHAIN_DEPTH and len(hinted.sequence) >= MIN_SHARED_TOKENS:
        shared = len(hinted.sequence)
        return EncodedPrompt(hinted.index, shared, pack(ids_to_bytes(prompt[shared:])), len(prompt), hinted.depth + 1)
    best: Candidate | None = None
    best_shared = 0
    for cand in candidates:
        if cand.depth + 1 > MAX_CHAIN_DEPTH:
            continue
        shared = common_prefix_length(prompt, cand.sequence)
        if shared > best_shared:
            best, best_shared = cand, shared
    if best is None or best_shared < MIN_SHARED_TOKENS:
        return EncodedPrompt(None, 0, pack(ids_to_bytes(prompt)), len(prompt), 0)
    tail = prompt[best_shared:]
    return EncodedPrompt(best.index, best_shared, pack(ids_to_bytes(tail)), len(prompt), best.depth + 1)


def decode_prompt(base: np.ndarray | None, prefix_len: int, tail_blob: bytes) -> np.ndarray:
    """Rebuild a prompt from its reference's sequence (None for a whole prompt) and its stored tail."""
    tail = bytes_to_ids(unpack(tail_blob))
    if base is None:
        return tail
    if prefix_len > len(base):
        from openforge.store.errors import CorruptRecordError

        raise CorruptRecordError(f"prompt prefix of {prefix_len} tokens exceeds its reference's {len(base)}")
    return np.concatenate([base[:prefix_len], tail])


class SequenceCache:
    """Thread-safe LRU of (episode_id, index) -> prompt + output ids, bounded by total tokens.

    Calls are write-once, so a cached sequence never goes stale; only committed calls may enter.
    """

    def __init__(self, max_tokens: int = 8_000_000):
        self._max_tokens = max_tokens
        self._tokens = 0
        self._items: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, episode_id: str, index: int) -> np.ndarray | None:
        with self._lock:
            seq = self._items.get((episode_id, index))
            if seq is not None:
                self._items.move_to_end((episode_id, index))
            return seq

    def put(self, episode_id: str, index: int, sequence: np.ndarray) -> None:
        if len(sequence) > self._max_tokens:
            return
        key = (episode_id, index)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return
            self._items[key] = sequence
            self._tokens += len(sequence)
            while self._tokens > self._max_tokens:
                _, dropped = self._items.popitem(last=False)
                self._tokens -= len(dropped)
