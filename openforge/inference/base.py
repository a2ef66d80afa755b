"""The one interface through which every sampled token flows.

A `Backend` takes prompt token ids and returns sampled token ids with their log-probabilities. The proxy
owns tokenization (docs/design.md, invariant 1); backends never see text, except the `scripted` and `oracle`
policies, which read the decoded conversation from the context to decide what to say.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import ValidationError

from openforge.core import Conversation, FinishReason, SamplingParams
from openforge.core.errors import ConfigurationError, ModelError, RequestError


class BackendError(ModelError, RuntimeError):
    """The backend could not serve a call (server down, timeout, bad reply). The proxy reports it to the
    harness in the dialect's own error shape and records the call with the error."""


class InvalidRequestError(RequestError, ValueError):
    """The request itself is wrong (prompt longer than the context, bad sampling values): a 4xx, not a 5xx."""


class BackendSpecError(ConfigurationError, InvalidRequestError):
    """A backend spec (`--backend`, `backend:` in a config) that is not understood or lacks what it needs."""


class PromptTooLongError(InvalidRequestError):
    def __init__(self, prompt_tokens: int, max_context: int):
        super().__init__(f"prompt is too long: {prompt_tokens} tokens > {max_context} maximum context length")
        self.prompt_tokens = prompt_tokens
        self.max_context = max_context


@dataclass
class GenerationContext:
    """What a backend may know about the call besides the tokens.

    `conversation` is the decoded request and `task` the episode's task (a dict or None): scripted
    policies and the oracle teacher act on them; model backends ignore them.
    """

    episode_id: str = ""
    call_index: int = 0
    side_call: bool = False
    conversation: Conversation | None = None
    task: Any = None


class SampledToken(NamedTuple):
    """One token as a streaming backend samples it."""

    id: int
    logprob: float


@dataclass
class GenerationResult:
    output_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    policy_version: int
    timings: dict[str, float] = field(default_factory=dict)


class Backend(abc.ABC):
    """Token ids in, token ids and log-probabilities out.

    Log-probabilities are those of the *sampling distribution*: log softmax(logits / temperature) at the
    sampled token, taken after temperature and before top-p / top-k truncation (with temperature 0, of the
    untempered distribution). The sampling parameters are recorded with every call so that a trainer can
    recompute the same quantity from a forward pass.

    Cancelling the `generate` task (asyncio cancellation) stops the generation.
    """

    #: bumped by every successful `load_weights`
    policy_version: int = 0

    @property
    @abc.abstractmethod
    def max_context(self) -> int:
        """The most tokens (prompt + output) one sequence may hold."""

    @abc.abstractmethod
    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> GenerationResult: ...

    #: whether `stream` yields tokens as they are sampled (False: all of them once generation has finished)
    streams_tokens: bool = False

    async def stream(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> AsyncIterator[SampledToken | GenerationResult]:
        """Each `SampledToken` as it is sampled, then the `GenerationResult` (whose ids and logprobs are
        those tokens). Leaving the iteration early, or cancelling it, stops the generation.

        This default waits for `generate` and then replays its tokens; backends that can stream override it
        (and set `streams_tokens`)."""
        result = await self.generate(prompt_ids, sampling, ctx)
        for token_id, logprob in zip(result.output_ids, result.logprobs):
            yield SampledToken(token_id, logprob)
        yield result

    #: whether `load_weights` may be called with calls in flight (each runs entirely under one version, the one
    #: its result reports); False: the proxy first waits for every call in flight to end (`RunningProxy.swap_weights`)
    swaps_in_flight: bool = False

    async def load_weights(self, path: str) -> int:
        """Load new weights from a model directory; returns the new policy version."""
        raise NotImplementedError(f"{type(self).__name__} cannot load weights")

    async def load_adapter(self, path: str) -> int:
        """Serve the LoRA adapter in `path` (PEFT's format) on the base weights from now on, in place of the
        adapter before it; returns the new policy version. Backends that load merged weights do not."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot load a LoRA adapter: push the merged weights (a model directory)"
        )

    async def close(self) -> None:
        return None

    def check_request(self, prompt_ids: list[int], sampling: SamplingParams) -> None:
        """Raise InvalidRequestError for a request no backend could serve."""
        if not prompt_ids:
            raise InvalidRequestError("prompt is empty: at least one token id is needed")
        if len(prompt_ids) >= self.max_context:
            raise PromptTooLongError(len(prompt_ids), self.max_context)
        # Re-validate: a SamplingParams built with model_construct() or mutated after construction skips checks.
        parse_sampling(sampling.model_dump())


def parse_sampling(values: dict[str, Any]) -> SamplingParams:
    """SamplingParams from request values; a bad value raises InvalidRequestError naming the field, the value
    and what is allowed (e.g. `temperature: -1.0 is invalid: Input should be greater than or equal to 0`)."""
    try:
        return SamplingParams.model_validate(values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "sampling"
            problems.append(f"{where}: {err.get('input')!r} is invalid: {err['msg']}")
        raise InvalidRequestError("invalid sampling parameters: " + "; ".join(problems)) from None


def check_token_ids(ids: list[int], vocab_size: int, what: str = "prompt") -> None:
    """Every id must be an int in [0, vocab_size)."""
    bad = next((i for i in ids if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < vocab_size), None)
    if bad is not None:
        raise InvalidRequestError(f"{what} holds token id {bad!r}, outside the vocabulary [0, {vocab_size})")


def clamp_max_tokens(prompt_len: int, sampling: SamplingParams, max_context: int) -> int:
    """The most new tokens that still fit in the context."""
    return max(0, min(sampling.max_tokens, max_context - prompt_len))


async def collect(events: AsyncIterator[SampledToken | GenerationResult]) -> GenerationResult:
    """The result at the end of a `Backend.stream` (for backends whose `generate` is their stream)."""
    async for event in events:
        if isinstance(event, GenerationResult):
            return event
    raise BackendError("the backend's stream ended without a result")
