"""What the HTTP clients of inference servers (vLLM, SGLang) share: the JSON client, the context length (known
from the constructor or learned from the server by `connect()`), and reading a token stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from openforge.core import FinishReason
from openforge.inference.base import Backend, BackendError, GenerationResult, SampledToken
from openforge.inference.jsonhttp import JSONClient

# One streamed event → (the ids it adds, their logprobs, the finish reason or None), given the ids so far.
StreamStep = Callable[[Any, list[int]], tuple[list[int], list[float], FinishReason | None]]


def adapter_name(version: int) -> str:
    """The name a LoRA adapter is loaded under on vLLM and SGLang: one per policy version (a server caches an
    adapter by name)."""
    return f"openforge-policy-{version}"


class RemoteBackend(Backend):
    server_name = "the server"

    def __init__(
        self,
        base_url: str,
        *,
        max_context: int | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        api_key: str | None = None,
    ):
        self.http = JSONClient(
            base_url, server=self.server_name, timeout=timeout, connect_timeout=connect_timeout, api_key=api_key
        )
        self._max_context = max_context
        self._server_checked = False

    @property
    def base_url(self) -> str:
        return self.http.base_url

    @property
    def max_context(self) -> int:
        if self._max_context is None:
            raise BackendError(
                f"{self.server_name}'s context length is unknown until the server is reached; pass max_context"
            )
        return self._max_context

    async def _tokens(
        self, events: AsyncIterator[Any], step: StreamStep
    ) -> AsyncIterator[SampledToken | GenerationResult]:
        """Each token of a server's stream as its event arrives, then the result; a stream that ends without a
        finish reason was cut off."""
        ids: list[int] = []
        logprobs: list[float] = []
        finish: FinishReason | None = None
        async for event in events:
            new_ids, new_logprobs, reason = step(event, ids)
            for token_id, logprob in zip(new_ids, new_logprobs):
                ids.append(token_id)
                logprobs.append(logprob)
                yield SampledToken(token_id, logprob)
            finish = reason or finish
        if finish is None:
            raise BackendError(f"{self.server_name}'s stream ended without a finish reason (the request was cut off)")
        yield GenerationResult(
            output_ids=ids, logprobs=logprobs, finish_reason=finish, policy_version=self.policy_version
        )
