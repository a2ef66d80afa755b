"""Pick the next token from one row of logits, and say how likely it was.

The reported log-probability is that of the *sampling distribution*: log softmax(logits / temperature) at the
chosen token, before top-k / top-p truncation (with temperature 0: of the untempered distribution). A trainer
recomputes exactly this from a forward pass and the recorded sampling parameters; the truncated distribution
would need the truncation set, which is not recorded.

Sampling draws one uniform number per token from the request's own `torch.Generator` and inverts the CDF, so
the same seed gives the same tokens whatever else is running at the same time. `sample_tokens` does a decode
step's rows together (the row-wise operations of `sample_token` on the whole batch, bit for bit the same
results): a few operations per step instead of a few per row.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from openforge.core import SamplingParams


def seeded_generator(seed: int) -> torch.Generator:
    generator = torch.Generator()
    generator.manual_seed(seed % (2**64))  # any int the API accepts, negative or huge, maps to a valid seed
    return generator


def sample_token(logits: torch.Tensor, sampling: SamplingParams, generator: torch.Generator) -> tuple[int, float]:
    """`logits`: shape (vocab,), float32. Returns (token id, log-probability under the sampling distribution)."""
    if sampling.temperature == 0.0:
        token = int(torch.argmax(logits))
        return token, float(torch.log_softmax(logits, dim=-1)[token])

    logprobs = torch.log_softmax(logits / sampling.temperature, dim=-1)
    candidates, weights = _truncate(logprobs, sampling.top_k, sampling.top_p)
    token = int(candidates[_draw(weights, generator)]) if candidates is not None else _draw(weights, generator)
    return token, float(logprobs[token])


def sample_tokens(
    logits: torch.Tensor, samplings: Sequence[SamplingParams], generators: Sequence[torch.Generator]
) -> list[tuple[int, float]]:
    """`sample_token` for each row of `logits` (shape (rows, vocab), float32) with its own sampling parameters
    and generator: the rows with a temperature and no truncation together, the others one by one."""
    plain = [i for i, sp in enumerate(samplings) if sp.temperature > 0.0 and not _truncates(sp, logits.shape[1])]
    out: list[tuple[int, float]] = [(0, 0.0)] * len(samplings)
    if plain:
        rows = logits[plain] if len(plain) < len(samplings) else logits
        temperatures = torch.tensor([[samplings[i].temperature] for i in plain], dtype=logits.dtype)
        logprobs = torch.log_softmax(rows / temperatures, dim=-1)
        weights = logprobs.exp().double()
        cdf = weights.cumsum(1)
        draws = [torch.rand((), generator=generators[i], dtype=torch.float64) for i in plain]
        u = torch.stack(draws) * cdf[:, -1]
        tokens = torch.searchsorted(cdf, u[:, None], right=True)[:, 0]
        top = tokens >= cdf.shape[1]  # rounding at the very top: the last token with any weight (as `_draw`)
        for r in top.nonzero()[:, 0].tolist():
            tokens[r] = torch.nonzero(weights[r] > 0)[-1, 0]
        chosen = logprobs.gather(1, tokens[:, None])[:, 0]
        for i, token, logprob in zip(plain, tokens.tolist(), chosen.tolist(), strict=True):
            out[i] = (token, logprob)
    done = set(plain)
    for i, sp in enumerate(samplings):
        if i not in done:
            out[i] = sample_token(logits[i], sp, generators[i])
    return out


def _truncates(sampling: SamplingParams, vocab: int) -> bool:
    return 0 < sampling.top_k < vocab or sampling.top_p < 1.0


def _truncate(logprobs: torch.Tensor, top_k: int, top_p: float) -> tuple[torch.Tensor | None, torch.Tensor]:
    """The kept candidates (None = the whole vocabulary) and their unnormalized weights, float64.

    Top-k first, then top-p over the renormalized top-k mass (vLLM's order). A token is kept while the mass of
    the tokens before it is below top_p, so the most likely token is always kept.
    """
    probs = logprobs.exp().double()
    vocab = probs.shape[0]
    if (top_k <= 0 or top_k >= vocab) and top_p >= 1.0:
        return None, probs
    sorted_probs, order = torch.sort(probs, descending=True)
    if 0 < top_k < vocab:
        sorted_probs, order = sorted_probs[:top_k], order[:top_k]
    if top_p < 1.0:
        mass_before = (sorted_probs.cumsum(0) - sorted_probs) / sorted_probs.sum()
        keep = int((mass_before < top_p).sum())
        sorted_probs, order = sorted_probs[: max(keep, 1)], order[: max(keep, 1)]
    return order, sorted_probs


def _draw(weights: torch.Tensor, generator: torch.Generator) -> int:
    """Inverse-CDF draw: one uniform number per token, whatever the distribution."""
    cdf = weights.cumsum(0)
    u = torch.rand((), generator=generator, dtype=torch.float64) * cdf[-1]
    index = int(torch.searchsorted(cdf, u, right=True))
    # u < cdf[-1] except for rounding at the very top; then take the last candidate with any weight.
    if index >= cdf.shape[0]:
        index = int(torch.nonzero(weights > 0)[-1])
    return index
