"""Pick the next token from one row of logits, and say how likely it was.

The reported log-probability is that of the *sampling distribution*: log softmax(logits / temperature) at the
chosen token, before top-k / top-p truncation (with temperature 0: of the untempered distribution). A trainer
recomputes exactly this from a forward pass and the recorded sampling parameters; the truncated distribution
would need the truncation set, which is not recorded.

Sampling draws one uniform number per token from the request's own `torch.Generator` and inverts the CDF, so
the same seed gives the same tokens whatever else is running at the same time.
"""

from __future__ import annotations

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
