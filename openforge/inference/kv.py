"""Key/value caches as plain tensors: one sequence's cache, a left-padded batch of them, and a prefix LRU.

A cache is a list with one (keys, values) pair per layer, each shaped (batch, kv_heads, tokens, head_dim).
Transformers' `DynamicCache` is built from these for the forward pass; a decode batch's is made of
`BufferedLayer`s (a DynamicLayer that writes new tokens into spare room instead of concatenating).

Every layer keeps every token, sliding-window layers too: left-padded batches and prefix crops need whole
caches, and the model's own attention masks hide what lies beyond a layer's window (the columns of a row are
its positions in order, so the mask's distances are the positions').
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

import torch
from transformers import DynamicCache, PretrainedConfig
from transformers.cache_utils import DynamicLayer

KV = list[tuple[torch.Tensor, torch.Tensor]]


def to_dynamic_cache(kv: KV | None) -> DynamicCache:
    """A cache of full layers (DynamicLayer: keeps every token), whatever the model's layer types."""
    return DynamicCache(ddp_cache_data=kv) if kv else DynamicCache()


def from_dynamic_cache(cache: DynamicCache) -> KV:
    return [_layer_kv(layer) for layer in cache.layers]


def _layer_kv(layer: object) -> tuple[torch.Tensor, torch.Tensor]:
    # Every cache here is made of DynamicLayers (to_dynamic_cache, BufferedLayer) that a forward pass has filled.
    assert isinstance(layer, DynamicLayer) and layer.keys is not None and layer.values is not None, layer
    return layer.keys, layer.values


ATTENTION_LAYERS = {"full_attention", "sliding_attention"}


def check_attention_layers(config: PretrainedConfig) -> None:
    """The caches here hold keys and values: a model with other layers (recurrent, linear attention) is refused."""
    other = sorted(set(getattr(config, "layer_types", None) or ["full_attention"]) - ATTENTION_LAYERS)
    if other:
        raise ValueError(
            f"the embedded backend serves attention models only (this one has {', '.join(other)} layers); "
            "serve it with vLLM or SGLang instead"
        )


def kv_length(kv: KV) -> int:
    return kv[0][0].shape[-2] if kv else 0


def crop(kv: KV, length: int, start: int = 0) -> KV:
    """Tokens [start, length) (views: the forward pass concatenates into new tensors, never writes these)."""
    return [(k[..., start:length, :], v[..., start:length, :]) for k, v in kv]


def row(kv: KV, i: int, start: int, end: int | None = None, before: KV | None = None) -> KV:
    """Tokens [start, end) of one sequence out of a batch (without its padding), after the one-row cache
    `before` if given (a prefix kept apart from the batch); copied so the batch's memory can be freed."""
    if before:
        return [
            (torch.cat((bk, k[i : i + 1, :, start:end]), dim=2), torch.cat((bv, v[i : i + 1, :, start:end]), dim=2))
            for (bk, bv), (k, v) in zip(before, kv, strict=True)
        ]
    return [(k[i : i + 1, :, start:end, :].clone(), v[i : i + 1, :, start:end, :].clone()) for k, v in kv]


class BufferedLayer(DynamicLayer):
    """A cache layer in buffers with room to grow: `keys`/`values` are views of their first `rows` rows and
    `length` columns, and a forward pass writes its new columns in place. (DynamicLayer concatenates, copying the
    whole cache at every decode step: for a large batch, most of the step's time.)"""

    _layer_type = None  # never registered as the class transformers builds for a layer type
    keys: torch.Tensor  # set by `view`: never None, unlike a DynamicLayer's before its first update
    values: torch.Tensor

    def __init__(self, key_buffer: torch.Tensor, value_buffer: torch.Tensor, rows: int, length: int):
        super().__init__()
        self.key_buffer, self.value_buffer = key_buffer, value_buffer
        self.device, self.is_initialized = key_buffer.device, True
        self.view(rows, length)

    def view(self, rows: int, length: int) -> None:
        self.rows, self.length = rows, length
        self.keys = self.key_buffer[:rows, :, :length]
        self.values = self.value_buffer[:rows, :, :length]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + key_states.shape[-2]
        if end > self.key_buffer.shape[-2]:  # out of room: half as much again
            self.key_buffer = _widened(self.key_buffer, end + end // 2)
            self.value_buffer = _widened(self.value_buffer, end + end // 2)
        self.key_buffer[: self.rows, :, self.length : end] = key_states
        self.value_buffer[: self.rows, :, self.length : end] = value_states
        self.view(self.rows, end)
        return self.keys, self.values


def _widened(buffer: torch.Tensor, columns: int) -> torch.Tensor:
    out = buffer.new_zeros((*buffer.shape[:2], columns, buffer.shape[3]))
    out[:, :, : buffer.shape[2]] = buffer
    return out


def buffered_cache(
    blocks: Sequence[KV | None], width: int, spare_rows: int = 0, spare_columns: int = 0
) -> DynamicCache:
    """A cache of `buffered_layers(blocks, width, spare_rows, spare_columns)`."""
    return cache_of(buffered_layers(blocks, width, spare_rows, spare_columns))


def cache_of(layers: Sequence[BufferedLayer]) -> DynamicCache:
    """A DynamicCache made of `layers` (the same objects: what a forward pass writes, they hold)."""
    cache = DynamicCache()
    cache.layers = list(layers)
    return cache


def buffered_layers(
    blocks: Sequence[KV | None], width: int, spare_rows: int = 0, spare_columns: int = 0
) -> list[BufferedLayer]:
    """BufferedLayers holding `blocks` (caches of one or more rows each; None: one row without
    tokens) one under the other, every row left-padded with zeros to `width` columns; with room for
    `spare_rows` more rows and `spare_columns` more columns. One copy of the data."""
    template = next(b for b in blocks if b)
    rows = sum(b[0][0].shape[0] if b else 1 for b in blocks)

    def stacked(layer: int, part: int) -> torch.Tensor:
        t0 = template[layer][part]
        buffer = t0.new_zeros((rows + spare_rows, t0.shape[1], width + spare_columns, t0.shape[3]))
        r = 0
        for block in blocks:
            if block:
                t = block[layer][part]
                buffer[r : r + t.shape[0], :, width - t.shape[2] : width] = t
            r += block[0][0].shape[0] if block else 1
        return buffer

    return [BufferedLayer(stacked(layer, 0), stacked(layer, 1), rows, width) for layer in range(len(template))]


def kv_bytes(kv: KV) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)


BLOCK = 16  # prefix lookups index whole blocks of this many tokens


def block_hashes(tokens: list[int]) -> list[int]:
    """Chained hashes of the whole BLOCK-token blocks: hash i stands for tokens[: (i + 1) * BLOCK]."""
    hashes, h = [], 0
    for end in range(BLOCK, len(tokens) + 1, BLOCK):
        h = hash((h, *tokens[end - BLOCK : end]))
        hashes.append(h)
    return hashes


@dataclass
class CachedPrefix:
    tokens: list[int]  # the tokens whose keys/values `kv` holds
    kv: KV
    nbytes: int
    blocks: list[int]  # block_hashes(tokens)


class PrefixCache:
    """Caches of recent calls, to skip re-reading the prompt prefix a new call shares with one of them.

    One entry per key (an episode, or a side line of one): the engine puts a call's prompt cache as soon as the
    prompt is read, and prompt + output when the call ends. Harness prompts grow by appending, so the next call
    of an episode usually starts with the previous call's prompt + output. The lookup considers every entry:
    the calls of a GRPO group, and all episodes of a run, start with the same system prompt. An index of
    block-aligned prefix hashes finds the entries sharing the longest prefix without scanning them all; the
    match is then measured token by token (exact). Where many entries share the deepest block, only the newest
    PER_BLOCK of them are measured past it, so the match may stop short of the best by less than a block.
    Bounded by entries and bytes; least recently used goes first. Thread-safe.
    """

    RECENT = 4  # the most recent entries are always compared too (prefixes shorter than a block)
    PER_BLOCK = 16  # entries compared among those sharing the deepest indexed block

    def __init__(self, max_entries: int = 16, max_bytes: int = 1 << 30):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, CachedPrefix] = OrderedDict()
        self._by_block: dict[int, dict[str, None]] = {}  # block hash -> keys of the entries holding that prefix
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, key: str, tokens: list[int], kv: KV) -> None:
        nbytes = kv_bytes(kv)
        if not key or self.max_entries <= 0 or nbytes > self.max_bytes:
            return
        entry = CachedPrefix(list(tokens), kv, nbytes, block_hashes(tokens))
        with self._lock:
            self._remove(key)
            self._entries[key] = entry
            self._bytes += nbytes
            for h in entry.blocks:
                self._by_block.setdefault(h, {})[key] = None
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                self._remove(next(iter(self._entries)))

    def _remove(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        self._bytes -= entry.nbytes
        for h in entry.blocks:
            keys = self._by_block.get(h)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._by_block[h]

    def longest_prefix(self, key: str, prompt: list[int]) -> tuple[int, KV | None]:
        """(n, kv of the first n prompt tokens) for the entry sharing the longest prefix with `prompt`.

        n < len(prompt): at least the last prompt token is always run, for the logits of the first new token.
        """
        if not prompt:
            return 0, None
        hashes = block_hashes(prompt)
        best_len, best_key = 0, None
        with self._lock:
            # The episode's own entry first: on a tie it wins, and it is the one made most recently useful.
            candidates = [key] if key in self._entries else []
            depth = 0
            while depth < len(hashes) and hashes[depth] in self._by_block:
                depth += 1
            if depth:
                candidates += list(self._by_block[hashes[depth - 1]])[-self.PER_BLOCK :]
            candidates += islice(reversed(self._entries), self.RECENT)
            for k in dict.fromkeys(candidates):
                n = common_prefix(self._entries[k].tokens, prompt)
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
            self._by_block.clear()
            self._bytes = 0


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens `a` and `b` share (slices compared in C, a block at a time)."""
    n = min(len(a), len(b))
    i = 0
    while i < n:
        j = min(i + 256, n)
        if a[i:j] != b[i:j]:
            while a[i] == b[i]:
                i += 1
            return i
        i = j
    return n
