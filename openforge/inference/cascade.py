"""Decode attention over a prefix every row of the batch shares, read once for all of them ("cascade" attention).

The rows of a decode batch often start alike: a GRPO group's samples share their whole prompt, and every episode
of a run shares the harness's system prompt (a thousand tokens or more). A decode step's attention reads each
row's keys and values for every token it holds, so at a 2,000-token prompt and 8 rows, reading the same prefix
8 times is most of what attention costs on a CPU. Here the batch keeps that prefix once
(`decode_batch.DecodeBatch.shared`, one row per layer) and each row only its own tokens after it; a step's
attention is split in two and merged exactly:

    scores_s = q · K_sharedᵀ · scale      (all rows' queries against the one shared copy: one matrix product)
    scores_o = q · K_ownᵀ · scale         (each row against its own tokens, padding masked)
    out      = (exp(scores_s − m) · V_shared + exp(scores_o − m) · V_own) / (Σ exp(scores_s − m) + Σ exp(scores_o − m))

with m the larger of the two maxima: the softmax over the concatenation, without building it.

The engine's model runs with attention implementation `CASCADE` (registered with transformers here): a forward
pass given `openforge_shared` (one (keys, values) pair per layer) for one new token per row takes this path;
every other pass (prefill, a batch without a shared prefix) is transformers' own SDPA attention, unchanged. Only
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
    shared = kwargs.pop(SHARED_ARGUMENT, None)
    if shared is None or query.shape[2] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
    shared_keys, shared_values = shared[module.layer_idx]  # (1, kv_heads, P, head_dim)
    rows, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    scale = scaling if scaling is not None else dim**-0.5
    q = query.reshape(rows, kv_heads, groups, dim)
    # every row's queries against the shared prefix: (kv_heads, rows * groups, P)
    q_by_head = q.transpose(0, 1).reshape(kv_heads, rows * groups, dim)
    s_shared = torch.bmm(q_by_head, shared_keys[0].transpose(1, 2)).mul_(scale)
    # each row against its own tokens: (rows, kv_heads, groups, own)
    s_own = torch.matmul(q, key.transpose(-1, -2)).mul_(scale)
    if attention_mask is not None:  # (rows, 1, 1, own), True where a row may look
        s_own.masked_fill_(~attention_mask[:, :, -1:, :].bool(), float("-inf"))
    m_shared = s_shared.amax(-1, keepdim=True)  # (kv_heads, rows * groups, 1)
    m_own = s_own.amax(-1, keepdim=True)  # (rows, kv_heads, groups, 1)
    m = torch.maximum(m_shared.reshape(kv_heads, rows, groups, 1).transpose(0, 1), m_own)
    e_shared = torch.exp(s_shared - m.transpose(0, 1).reshape(kv_heads, rows * groups, 1))
    e_own = torch.exp(s_own - m)
    out_shared = torch.bmm(e_shared, shared_values[0])  # (kv_heads, rows * groups, dim)
    total = e_shared.sum(-1, keepdim=True).reshape(kv_heads, rows, groups, 1).transpose(0, 1) + e_own.sum(
        -1, keepdim=True
    )
    out = out_shared.reshape(kv_heads, rows, groups, dim).transpose(0, 1) + torch.matmul(e_own, value)
    out = (out / total).reshape(rows, heads, 1, dim)
    return out.transpose(1, 2).contiguous(), None  # (rows, 1, heads, dim), as transformers' attentions return


AttentionInterface.register(CASCADE, attention)
AttentionMaskInterface.register(CASCADE, sdpa_mask)


def enable(model: torch.nn.Module) -> bool:
    """Run `model` with the cascade attention where it qualifies; whether it does."""
    config = getattr(model, "config", None)
    if config is None or not supports(config):
        return False
    model.set_attn_implementation(CASCADE)  # type: ignore[operator]
    return True
