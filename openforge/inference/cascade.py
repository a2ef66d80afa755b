"""Decode attention over a prefix every row of the batch shares, read once for all of them ("cascade" attention).

The rows of a decode batch often start alike: a GRPO group's samples share their whole prompt, and every episode
of a run shares the harness's system prompt (a thousand tokens or more). A decode step's attention reads each
row's keys and values for every token it holds, so at a 2,000-token prompt and 8 rows, reading the same prefix
8 times is most of what attention costs on a CPU. Here the batch keeps that prefix once
(`decode_batch.DecodeBatch.shared`, one row per layer) and each row only its own tokens after it; a step's
attention is split in two and merged exactly:

    out_s, lse_s = attention(q, K_shared, V_shared)   (all rows' queries against the one shared copy)
    out_o, lse_o = attention(q, K_own, V_own)         (each row against its own tokens: padding masked, causal)
    out          = out_o + (out_s − out_o) · sigmoid(lse_s − lse_o)

each part through torch's CPU flash attention, which also returns every query's log-sum-exp `lse` of its
scores: `sigmoid(lse_s − lse_o)` is the shared part's share of the whole softmax's sum, so `out` is the softmax
over the concatenation without building it.

The engine's model runs with attention implementation `CASCADE` (registered with transformers here): a forward
pass given `openforge_shared` (one (keys, values) pair per layer) takes this path — a decode step (one new token
per row) or prompts read together behind a cached prefix they share (several, causal among themselves); every
other pass (a batch without a shared prefix) is transformers' own SDPA attention, unchanged. Only
models whose attention is plain scaled dot-product over every token qualify (`supports`): no sliding windows,
soft-capping or attention sinks.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface, PretrainedConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

CASCADE = "openforge_cascade"
SHARED_ARGUMENT = "openforge_shared"  # the forward-pass keyword carrying the shared keys and values

# model types whose attention is softmax(q·kᵀ·scale)·v over the cache, nothing more (per-head norms before the
# cache are fine); others keep transformers' attention
PLAIN_ATTENTION = {"llama", "mistral", "qwen2", "qwen3", "smollm3", "olmo2"}


def supports(config: PretrainedConfig) -> bool:
    """Whether the model's attention can be split this way."""
    if config.model_type not in PLAIN_ATTENTION:
        return False
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        return False
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    return set(layer_types) == {"full_attention"}


def attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention over the shared prefix (given as `openforge_shared`) and each row's own cache (`key`, `value`).

    `query` holds S new tokens per row (S = 1 for a decode step, more when prompts are read): every one sees the
    whole shared prefix, and its own row's tokens as `attention_mask` allows (causal when it is None)."""
    shared = kwargs.pop(SHARED_ARGUMENT, None)
    if shared is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
    shared_keys, shared_values = shared[module.layer_idx]  # (1, kv_heads, P, head_dim)
    rows, heads, length, dim = query.shape
    kv_heads, own = key.shape[1], key.shape[2]
    groups = heads // kv_heads
    scale = scaling if scaling is not None else dim**-0.5
    # query head h reads kv head h // groups: (rows, kv_heads, groups * S, dim), S innermost
    q = query.reshape(rows, kv_heads, groups * length, dim)
    # every row's queries against the one shared copy, as one sequence of rows * groups * S queries per kv head
    q_by_head = q.transpose(0, 1).reshape(1, kv_heads, rows * groups * length, dim)
    out_shared, lse_shared = _FLASH(q_by_head, shared_keys, shared_values, 0.0, False, scale=scale)
    out_shared = out_shared[0].reshape(kv_heads, rows, groups * length, dim).transpose(0, 1)
    lse_shared = lse_shared[0].reshape(kv_heads, rows, groups * length).transpose(0, 1)
    # each row against its own tokens: (rows, kv_heads, groups * S, ...)
    allowed = None
    if attention_mask is not None:  # (rows, 1, S, own), True where a query may look
        allowed = attention_mask[:, :, -length:, :].bool()
    elif length > 1:  # causal: the S new tokens are the last S of the row's own
        allowed = torch.ones(1, 1, length, own, dtype=torch.bool).tril_(own - length)
    bias = None  # the kernel takes an additive mask of the query's dtype
    if allowed is not None:
        bias = torch.zeros(allowed.shape, dtype=query.dtype).masked_fill_(~allowed, float("-inf"))
        bias = bias.repeat(1, 1, groups, 1) if groups > 1 else bias
    out_own, lse_own = _FLASH(q, key, value, 0.0, False, attn_mask=bias, scale=scale)
    # the softmax over both parts: each part's output weighted by its share of the total exp-sum
    weight_shared = torch.sigmoid(lse_shared - lse_own).unsqueeze(-1)
    out = torch.lerp(out_own.nan_to_num(0.0), out_shared, weight_shared)
    return out.reshape(rows, heads, length, dim).transpose(1, 2).contiguous(), None  # (rows, S, heads, dim)


# flash attention on the CPU, which also returns each query's log-sum-exp (what merging two parts needs)
_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


AttentionInterface.register(CASCADE, attention)
AttentionMaskInterface.register(CASCADE, sdpa_mask)


def enable(model: torch.nn.Module) -> bool:
    """Run `model` with the cascade attention where it qualifies; whether it does."""
    config = getattr(model, "config", None)
    if config is None or not supports(config):
        return False
    model.set_attn_implementation(CASCADE)  # type: ignore[operator]
    return True
