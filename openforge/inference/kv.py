"""Key/value caches as plain tensors: one sequence's cache, a left-padded batch of them, and a prefix LRU.

A cache is a list with one (keys, values) pair per layer, each shaped (batch, kv_heads, tokens, head_dim).
Transformers' `DynamicCache` is built from these only for the forward pass, so that batching, splitting and
storing caches does not depend on the cache class's internals.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

KV = list[tuple[torch.Tensor, torch.Tensor]]


def to_dynamic_cache(kv: KV | None, config) -> DynamicCache:
    if not kv:
        return DynamicCache(config=config)
    return DynamicCache(ddp_cache_data=kv, config=config)


def from_dynamic_cache(cache: DynamicCache) -> KV:
    if hasattr(cache, "layers"):  # transformers >= 4.56
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))  # older releases


def check_full_attention(config) -> None:
    """Left-padded batches and prefix crops assume every layer keeps all tokens (no sliding window)."""
    cache = DynamicCache(config=config)
    if hasattr(cache, "layers") and any(type(layer) is not DynamicLayer for layer in cache.layers):
        raise ValueError(
            "the embedded backend supports full-attention models only (this one has sliding-window or "
            "recurrent layers); serve it with vLLM or SGLang instead"
        )


def kv_length(kv: KV) -> int:
    return kv[0][0].shape[-2] if kv else 0


def crop(kv: KV, length: int) -> KV:
    """The first `length` tokens (views: the forward pass concatenates into new tensors, never writes these)."""
    return [(k[..., :length, :], v[..., :length, :]) for k, v in kv]


def left_pad(kv: KV, pad: int) -> KV:
    if pad == 0:
        return kv
    return [(torch.nn.functional.pad(k, (0, 0, pad, 0)), torch.nn.functional.pad(v, (0, 0, pad, 0))) for k, v in kv]


def concat_rows(a: KV, b: KV) -> KV:
    return [(torch.cat([ka, kb]), torch.cat([va, vb])) for (ka, va), (kb, vb) in zip(a, b)]


def select_rows(kv: KV, rows: list[int], drop_left: int = 0) -> KV:
    """Keep `rows` of a batch, dropping `drop_left` columns of padding that no kept row needs."""
    index = torch.tensor(rows, dtype=torch.long)
    return [(k.index_select(0, index)[..., drop_left:, :], v.index_select(0, index)[..., drop_left:, :]) for k, v in kv]


def row(kv: KV, i: int, start: int) -> KV:
    """One sequence out of a batch, without its left padding; copied so the batch's memory can be freed."""
    return [(k[i : i + 1, :, start:, :].clone(), v[i : i + 1, :, start:, :].clone()) for k, v in kv]


def kv_bytes(kv: KV) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)


@dataclass
class CachedPrefix:
    tokens: torch.Tensor  # int64, the tokens whose keys/values `kv` holds
    kv: KV


class PrefixCache:
    """The last cache of each recent episode, to skip re-reading the prompt prefix the next call shares.

    Harness prompts grow by appending, so the next call of an episode usually starts with the previous call's
    prompt + output. The lookup also considers other episodes' entries: the calls of a GRPO group start with
    the same prompt. Bounded by entries and bytes; least recently used goes first. Thread-safe.
    """

    def __init__(self, max_entries: int = 16, max_bytes: int = 1 << 30):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, CachedPrefix] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, key: str, tokens: list[int], kv: KV) -> None:
        if not key or self.max_entries <= 0 or kv_bytes(kv) > self.max_bytes:
            return
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = CachedPrefix(torch.tensor(tokens, dtype=torch.long), kv)
            total = sum(kv_bytes(e.kv) for e in self._entries.values())
            while len(self._entries) > self.max_entries or total > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                total -= kv_bytes(evicted.kv)

    def longest_prefix(self, key: str, prompt: list[int]) -> tuple[int, KV | None]:
        """(n, kv of the first n prompt tokens) for the entry sharing the longest prefix with `prompt`.

        n < len(prompt): at least the last prompt token is always run, for the logits of the first new token.
        """
        if not prompt:
            return 0, None
        query = torch.tensor(prompt, dtype=torch.long)
        best_len, best_key = 0, None
        with self._lock:
            # The episode's own entry first: on a tie it wins, and it is the one made most recently useful.
            keys = ([key] if key in self._entries else []) + [k for k in self._entries if k != key]
            for k in keys:
                n = _common_prefix(self._entries[k].tokens, query)
                if n > best_len:
                    best_len, best_key = n, k
            if best_key is None:
                return 0, None
            self._entries.move_to_end(best_key)
            entry = self._entries[best_key]
        usable = min(best_len, len(prompt) - 1)
        return (usable, crop(entry.kv, usable)) if usable > 0 else (0, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    n = min(a.shape[0], b.shape[0])
    if n == 0:
        return 0
    differs = torch.nonzero(a[:n] != b[:n])
    return int(differs[0]) if differs.numel() else n
