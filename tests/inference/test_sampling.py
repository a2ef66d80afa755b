"""The sampler on hand-made logits: truncation sets, draw frequencies, reported logprobs, determinism."""

from __future__ import annotations

import math
from collections import Counter

import torch

from openforge.core import SamplingParams
from openforge.inference.sampling import _truncate, sample_token, sample_tokens, seeded_generator

PROBS = torch.tensor([0.4, 0.3, 0.2, 0.1])
LOGITS = PROBS.log()


def test_top_p_keeps_tokens_until_the_mass_before_them_reaches_p():
    kept, _ = _truncate(torch.log_softmax(LOGITS, -1), top_k=0, top_p=0.5)
    assert kept.tolist() == [0, 1]
    kept, _ = _truncate(torch.log_softmax(LOGITS, -1), top_k=0, top_p=0.05)
    assert kept.tolist() == [0]  # the most likely token always stays
    kept, _ = _truncate(torch.log_softmax(LOGITS, -1), top_k=3, top_p=1.0)
    assert kept.tolist() == [0, 1, 2]
    kept, _ = _truncate(torch.log_softmax(LOGITS, -1), top_k=0, top_p=1.0)
    assert kept is None  # no truncation: the whole vocabulary


def test_draws_follow_the_distribution_and_report_untruncated_logprobs():
    generator = seeded_generator(0)
    sampling = SamplingParams(temperature=1.0)
    counts = Counter(sample_token(LOGITS, sampling, generator)[0] for _ in range(4000))
    for token, p in enumerate(PROBS.tolist()):
        assert abs(counts[token] / 4000 - p) < 0.03

    truncated = SamplingParams(temperature=2.0, top_k=2)
    for _ in range(50):
        token, logprob = sample_token(LOGITS, truncated, generator)
        assert token in (0, 1)
        assert math.isclose(logprob, float(torch.log_softmax(LOGITS / 2.0, -1)[token]), abs_tol=1e-6)


def test_greedy_and_seeded_draws_are_deterministic():
    token, logprob = sample_token(LOGITS, SamplingParams(temperature=0.0), seeded_generator(0))
    assert token == 0 and math.isclose(logprob, math.log(0.4), abs_tol=1e-6)
    sampling = SamplingParams(temperature=0.9, top_p=0.8)
    a = [sample_token(LOGITS, sampling, g)[0] for g in [seeded_generator(7)] for _ in range(30)]
    b = [sample_token(LOGITS, sampling, g)[0] for g in [seeded_generator(7)] for _ in range(30)]
    assert a == b
    assert seeded_generator(-1).initial_seed() == 2**64 - 1  # negative seeds are valid too


def test_a_batch_samples_exactly_as_its_rows_would_one_by_one():
    """The engine samples a decode step's rows together: the same tokens and the same logprobs, bit for bit, as
    `sample_token` row by row with the same generators, for every mix of greedy, plain and truncated rows, also
    over many steps (each row's generator advanced once per token, whatever the other rows do)."""
    torch.manual_seed(0)
    kinds = [
        SamplingParams(temperature=1.0),
        SamplingParams(temperature=0.7),
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=1.3, top_p=0.9),
        SamplingParams(temperature=1.0, top_k=5),
        SamplingParams(temperature=2.0),
    ]
    samplings = [kinds[i % len(kinds)] for i in range(37)]
    batch_gens = [seeded_generator(100 + i) for i in range(37)]
    row_gens = [seeded_generator(100 + i) for i in range(37)]
    for _ in range(20):
        logits = torch.randn(37, 1024) * 4
        batched = sample_tokens(logits, samplings, batch_gens)
        one_by_one = [sample_token(logits[i], sp, g) for i, (sp, g) in enumerate(zip(samplings, row_gens))]
        assert batched == one_by_one
    plain = [SamplingParams(temperature=1.0)] * 3  # only plain rows: the whole batch at once
    logits = torch.randn(3, 1024)
    assert sample_tokens(logits, plain, [seeded_generator(i) for i in range(3)]) == [
        sample_token(logits[i], plain[i], seeded_generator(i)) for i in range(3)
    ]
