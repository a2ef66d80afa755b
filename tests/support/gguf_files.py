"""Small GGUF files the tests write themselves (gguf's own writer): a 2-layer Llama with a byte-level BPE
tokenizer, F32 weights, or with one tensor in a quantisation gguf cannot dequantise, or an architecture
transformers does not read."""

from __future__ import annotations

from pathlib import Path

import numpy as np

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _byte_tokens() -> list[str]:
    """GPT-2's byte-to-unicode alphabet: one token per byte, so any text encodes."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, n = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + n)
            n += 1
    return [chars[b] for b in range(256)]


def write_tiny_gguf(path: Path, *, architecture: str = "llama", unreadable_tensor: bool = False, seed: int = 0) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merges = ["Ġ t", "h e", "Ġt he"]
    tokens = specials + _byte_tokens() + ["Ġt", "he", "Ġthe"]
    types = [gguf.TokenType.CONTROL] * len(specials) + [gguf.TokenType.NORMAL] * (len(tokens) - len(specials))
    vocab, hidden, ffn, layers, heads = len(tokens), 64, 128, 2, 4
    w = gguf.GGUFWriter(str(path), architecture)
    w.add_name("openforge test llama")
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hidden // heads)
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(2)
    w.add_chat_template(CHAT_TEMPLATE)

    def t(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    w.add_tensor("token_embd.weight", t(vocab, hidden))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    w.add_tensor("output.weight", t(vocab, hidden))
    for i in range(layers):
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{name}.weight", t(hidden, hidden))
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", t(ffn, hidden))
        w.add_tensor(f"blk.{i}.ffn_up.weight", t(ffn, hidden))
        if unreadable_tensor and i == layers - 1:
            qtype = gguf.GGMLQuantizationType.Q8_1
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            raw = np.zeros((hidden, ffn // block * size), dtype=np.uint8)
            w.add_tensor(f"blk.{i}.ffn_down.weight", raw, raw_dtype=qtype)
        else:
            w.add_tensor(f"blk.{i}.ffn_down.weight", t(hidden, ffn))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
