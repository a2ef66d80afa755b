"""`VerlServerBackend`: the proxy's backend inside a veRL agent loop. Token ids in, ids + logprobs out, through
veRL's own server client (`LLMServerClient.generate`, veRL 0.9.1):

    await client.generate(request_id, *, prompt_ids=[...], sampling_params={...}) -> TokenOutput
        TokenOutput.token_ids, .log_probs (None unless sampling_params["logprobs"]), .stop_reason
        ("completed" for both stop and length, "aborted"), .extra_fields["global_steps"] (weights version)

One backend serves every episode of a worker (one proxy per worker). Each episode is *bound* to the client
and the sampling parameters veRL handed its `run()` (training and validation differ), so calls of the
episode sample exactly as veRL asked. Its episode id is the request id: veRL routes the calls of one
request id to the same server (prefix cache reuse across turns).

Sampling: temperature, top_p, top_k and repetition_penalty are veRL's (its actor recomputes logprobs at the
rollout temperature: the harness must not change it); max_tokens, stop strings, stop ids and seed come from
the harness's request as the proxy clamped it. Logprobs are always asked for: the proxy records them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from openforge.core import FinishReason, SamplingParams
from openforge.inference.base import (
    Backend,
    BackendError,
    GenerationContext,
    GenerationResult,
    clamp_max_tokens,
)

if TYPE_CHECKING:
    from verl.workers.rollout.replica import TokenOutput


class ServerClient(Protocol):
    """What this backend uses of veRL's server client (`LLMServerClient`, the agent loop's `server_manager`)."""

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]
    ) -> TokenOutput: ...


#: the keys of veRL's per-rollout sampling params this backend forwards (AgentLoopWorker.generate_sequences)
VERL_SAMPLING_KEYS = ("temperature", "top_p", "top_k", "repetition_penalty")


@dataclass
class Binding:
    client: ServerClient
    sampling_params: dict[str, Any]


class VerlServerBackend(Backend):
    """`max_context`: the rollout's context (veRL's `rollout.max_model_len`, else prompt + response length);
    `eos_token_ids`: the model's end ids (sampling stops at them, as the proxy expects)."""

    def __init__(self, max_context: int, eos_token_ids: list[int]):
        self._max_context = max_context
        self._eos = list(eos_token_ids)
        self._bindings: dict[str, Binding] = {}

    @property
    def max_context(self) -> int:
        return self._max_context

    def bind(self, episode_id: str, client: ServerClient, sampling_params: Mapping[str, Any]) -> None:
        self._bindings[episode_id] = Binding(client, dict(sampling_params))

    def unbind(self, episode_id: str) -> None:
        self._bindings.pop(episode_id, None)

    @property
    def bound_episodes(self) -> int:
        return len(self._bindings)

    def request_params(self, binding: Binding, sampling: SamplingParams, max_tokens: int) -> dict[str, Any]:
        params = {k: binding.sampling_params[k] for k in VERL_SAMPLING_KEYS if k in binding.sampling_params}
        params.update(
            max_tokens=max_tokens, logprobs=True, stop_token_ids=sorted(set(sampling.stop_token_ids) | set(self._eos))
        )
        if sampling.stop:
            params["stop"] = list(sampling.stop)
        if sampling.seed is not None:
            params["seed"] = sampling.seed
        return params

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> GenerationResult:
        binding = self._bindings.get(ctx.episode_id)
        if binding is None:
            raise BackendError(
                f"episode {ctx.episode_id} is not bound to a veRL server client (only episodes "
                "started by the openforge agent loop can sample here)"
            )
        self.check_request(prompt_ids, sampling)
        max_tokens = clamp_max_tokens(len(prompt_ids), sampling, self.max_context)
        params = self.request_params(binding, sampling, max_tokens)
        try:
            out = await binding.client.generate(ctx.episode_id, prompt_ids=list(prompt_ids), sampling_params=params)
        except Exception as e:
            raise BackendError(f"veRL server: {type(e).__name__}: {e}") from e
        return self._result(out, max_tokens, set(params["stop_token_ids"]))

    def _result(self, out: TokenOutput, max_tokens: int, stop_ids: set[int]) -> GenerationResult:
        if out.stop_reason in ("aborted", "abort"):
            raise BackendError("veRL aborted the request (weights were being updated?)")
        ids = [int(t) for t in out.token_ids]
        logprobs = [float(v) for v in out.log_probs] if out.log_probs is not None else None
        if logprobs is None or len(logprobs) != len(ids):
            raise BackendError(
                f"veRL answered {len(ids)} token ids but {'no' if logprobs is None else len(logprobs)} logprobs"
            )
        # veRL reports "completed" for stop and length alike: tell them apart by the last token
        stopped = bool(ids) and ids[-1] in stop_ids
        finish = FinishReason.stop if stopped or len(ids) < max_tokens else FinishReason.length
        version = out.extra_fields.get("global_steps")
        self.policy_version = int(version) if version is not None else self.policy_version
        return GenerationResult(
            output_ids=ids, logprobs=logprobs, finish_reason=finish, policy_version=self.policy_version
        )
