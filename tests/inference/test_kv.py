"""The prefix cache on its own: longest shared prefix among many entries (block index), exact lengths, LRU and
byte bounds; and the decode batch's growing buffers."""

from __future__ import annotations

import pytest
import torch

from openforge.inference import kv as kvlib


def fake_kv(tokens: list[int], layers: int = 2) -> kvlib.KV:
    """A cache whose keys/values at position i hold token i: a crop shows which tokens it kept."""
    t = torch.tensor(tokens, dtype=torch.float32).view(1, 1, -1, 1).expand(1, 2, -1, 3).contiguous()
    return [(t.clone(), -t.clone()) for _ in range(layers)]


def test_the_longest_shared_prefix_is_found_among_many_entries():
    cache = kvlib.PrefixCache(max_entries=100)
    system = list(range(1000, 1000 + 70))
    for i in range(40):  # many entries sharing the system prompt, then one sharing more of the query
        cache.put(f"e{i}", system + [i, i + 1, i + 2], fake_kv(system + [i, i + 1, i + 2]))
    cache.put("long", system + list(range(5, 45)), fake_kv(system + list(range(5, 45))))
    for i in range(8):  # newer entries that share nothing
        cache.put(f"other{i}", [7, 8, 9, i], fake_kv([7, 8, 9, i]))

    query = system + list(range(5, 40)) + [999, 998]
    n, kv = cache.longest_prefix("new-episode", query)
    assert n == 70 + 35 and kvlib.kv_length(kv) == n
    assert kv[0][0][0, 0, :, 0].tolist() == [float(t) for t in query[:n]]

    assert cache.longest_prefix("new-episode", system + [39, 40, 77])[0] == 72  # token by token past the blocks
    # Among many entries sharing the deepest block only the newest are measured further: at worst the match
    # stops short of the best by less than a block.
    assert 72 - kvlib.BLOCK < cache.longest_prefix("new-episode", system + [3, 4, 77])[0] <= 72
    assert cache.longest_prefix("x", system[:5] + [1])[0] == 5  # shorter than a block: an entry still found
    assert cache.longest_prefix("x", [55, 56])[0] == 0
    assert cache.longest_prefix("long", list(range(5)))[0] == 0


def test_the_episodes_own_entry_wins_and_the_last_prompt_token_is_left_to_run():
    cache = kvlib.PrefixCache(max_entries=8)
    prompt = list(range(100, 140))
    cache.put("a", prompt, fake_kv(prompt))
    cache.put("b", prompt, fake_kv(prompt))
    n, kv = cache.longest_prefix("a", prompt)
    assert n == len(prompt) - 1 and kvlib.kv_length(kv) == n


def test_entries_are_evicted_by_count_and_bytes_and_leave_the_index():
    one = kvlib.kv_bytes(fake_kv(list(range(32))))
    cache = kvlib.PrefixCache(max_entries=3, max_bytes=10 * one)
    for i in range(5):
        cache.put(f"e{i}", [i] * 32, fake_kv([i] * 32))
    assert len(cache) == 3
    assert cache.longest_prefix("x", [0] * 33)[0] == 0 and cache.longest_prefix("x", [4] * 33)[0] == 32
    assert cache._bytes == 3 * one
    cache.put("big", list(range(320)), fake_kv(list(range(320))))  # 10 entries' worth: the others go
    assert list(cache._entries) == ["big"] and cache._bytes == kvlib.kv_bytes(cache._entries["big"].kv)
    assert all(set(keys) == {"big"} for keys in cache._by_block.values())
    cache.put("big", [1, 2, 3], fake_kv([1, 2, 3]))  # replaced: its old blocks leave the index
    assert not cache._by_block
    cache.clear()
    assert len(cache) == 0 and cache._bytes == 0


def test_buffered_cache_left_pads_rows_and_grows_in_place():
    cache = kvlib.buffered_cache([fake_kv([1, 2, 3]), None, fake_kv([4])], 4, spare_columns=1)
    keys = [layer.keys[:, 0, :, 0].tolist() for layer in cache.layers]
    assert keys[0] == [[0, 1, 2, 3], [0, 0, 0, 0], [0, 0, 0, 4]] and len(cache.layers) == 2
    layer = cache.layers[0]
    buffer = layer.key_buffer
    new = torch.full((3, 2, 1, 3), 9.0)
    layer.update(new, -new)  # fits the spare column: written in place
    assert layer.key_buffer is buffer and layer.keys[:, 0, :, 0].tolist()[1] == [0, 0, 0, 0, 9]
    layer.update(new, -new)  # no room left: widened, contents kept
    assert layer.key_buffer is not buffer and layer.keys[:, 0, :, 0].tolist()[2] == [0, 0, 0, 4, 9, 9]
    assert layer.values[:, 0, :, 0].tolist()[0] == [0, -1, -2, -3, -9, -9]


def test_attention_layers_are_served_and_other_layers_refused():
    from types import SimpleNamespace

    for layers in (["full_attention"] * 2, ["sliding_attention", "full_attention"], None):
        kvlib.check_attention_layers(SimpleNamespace(layer_types=layers))
    with pytest.raises(ValueError, match="linear_attention layers.*vLLM or SGLang"):
        kvlib.check_attention_layers(SimpleNamespace(layer_types=["full_attention", "linear_attention"]))
