"""Train the tiny model's byte-level BPE tokenizer with `tokenizers`, from the generated corpus.

Byte-level: any UTF-8 text round-trips (unknown characters fall back to their bytes). Digits are split into
single tokens: with merged multi-digit tokens a tiny model copies numbers confidently wrong
(docs/design.md, "Training the tiny model").
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from openforge.models.corpus import generate_corpus

# Control tokens of the ChatML / Qwen-style template. Order fixes their ids (0..8).
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"


def train_tokenizer(vocab_size: int = 1024, seed: int = 0) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(generate_corpus(seed), trainer=trainer)
    return tokenizer
