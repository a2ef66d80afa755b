"""Build OpenForge's tiny model locally: a seeded random-init Qwen2 causal LM with its own tokenizer.

Nothing is downloaded. The result is an ordinary Hugging Face model directory (config.json,
model.safetensors, tokenizer.json, tokenizer_config.json, chat_template.jinja, generation_config.json) that
`openforge proxy --model`, transformers and vLLM can load.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from openforge.models.tokenizer_builder import EOS_TOKEN, PAD_TOKEN, SPECIAL_TOKENS, train_tokenizer


class TinyModelSpec(BaseModel):
    """Shape of the tiny model. The defaults give about 2M parameters (docs/design.md, "Training the tiny model")."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    vocab_size: int = Field(default=1024, ge=len(SPECIAL_TOKENS) + 256)
    hidden_size: int = Field(default=192, ge=16)
    layers: int = Field(default=4, ge=1)
    heads: int = Field(default=4, ge=1)
    kv_heads: int = Field(default=4, ge=1)
    intermediate_size: int = Field(default=512, ge=16)
    # Long enough for a real harness's prompt (Claude Code's first call is ~30k tokens here) to fit and grow.
    max_position_embeddings: int = Field(default=131072, ge=131072)
    # Sliding-window attention in every layer (None: full attention). Each layer sees only the last N tokens, so
    # a long constant harness prompt stays out of reach of the layer that copies from the task: behind Claude
    # Code's 300-token prompt the full-attention model never learned to copy, a window of 96 did
    # (docs/design.md, "Training the tiny model": behind a real harness's prompt).
    sliding_window: int | None = Field(default=None, ge=16)


def chat_template() -> str:
    return resources.files("openforge.models").joinpath("assets/chat_template.jinja").read_text()


def build_tiny_model(out_dir: str | Path, seed: int = 0, spec: TinyModelSpec | None = None) -> Path:
    """Write a tiny model directory to `out_dir` and return its path. Same seed, same bytes."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging as hf_logging

    # transformers' per-shard progress bars are noise for a 2M-parameter model saved and loaded many times.
    hf_logging.disable_progress_bar()
    spec = spec or TinyModelSpec(seed=seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = train_tokenizer(vocab_size=spec.vocab_size, seed=spec.seed)
    tokenizer.save(str(out / "tokenizer.json"))
    pad_id = tokenizer.token_to_id(PAD_TOKEN)
    eos_id = tokenizer.token_to_id(EOS_TOKEN)

    template = chat_template()
    (out / "chat_template.jinja").write_text(template)
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": spec.max_position_embeddings,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "chat_template": template,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps({"eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN}))

    # Round the embedding up to a multiple of 64 (faster matmuls); the extra rows are never produced.
    vocab = -(-tokenizer.get_vocab_size() // 64) * 64
    # rope_theta and torch_dtype: the names every supported transformers reads (4.56 takes no `rope_parameters`);
    # transformers 5 still accepts them, but its typed signature does not list them
    config = Qwen2Config(  # type: ignore[call-arg]
        vocab_size=vocab,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        max_position_embeddings=spec.max_position_embeddings,
        rope_theta=10_000.0,  # short quickstart prompts; the SFT run that learned to copy used this base
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        torch_dtype="float32",
        use_sliding_window=spec.sliding_window is not None,
        sliding_window=spec.sliding_window,
        max_window_layers=0,
        layer_types=["sliding_attention" if spec.sliding_window else "full_attention"] * spec.layers,
    )
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = [eos_id, pad_id]
    model.generation_config.pad_token_id = pad_id
    model.save_pretrained(out, safe_serialization=True)
    (out / "openforge_tiny.json").write_text(spec.model_dump_json(indent=2))
    return out
