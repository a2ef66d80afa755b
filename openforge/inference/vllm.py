"""`vllm`: a client of vLLM's OpenAI-compatible server, token ids in and token ids + logprobs out.

It posts `/v1/completions` with `prompt` = the token ids (no text, no chat template: the proxy already
rendered them) and reads the sampled ids from `logprobs.tokens` = `"token_id:<id>"`
(`return_tokens_as_token_ids`) — or from `choices[0].token_ids` when a server sends them — and their
log-probabilities from `choices[0].logprobs.token_logprobs`. It does not ask for `return_token_ids`: vLLM then
also echoes the whole prompt's ids (`prompt_token_ids`), which at a 100k-token context is ~0.6 MB of JSON for
the server to write and the proxy to parse on every call, for ids the proxy sent itself.

Start vLLM so its logprobs are the ones OpenForge records (those of the sampling distribution, after
temperature):

    vllm serve MODEL_DIR --logprobs-mode processed_logprobs --generation-config vllm

- `--logprobs-mode processed_logprobs`: by default vLLM returns *raw* logprobs, before temperature. The
  processed ones are after temperature *and* after top-k/top-p truncation (renormalized); they equal
  OpenForge's definition when top_k = 0 and top_p = 1, the usual RL setting.
- `--generation-config vllm` (or sending every knob, which this client does): otherwise vLLM takes default
  sampling values (repetition penalty, top-k, ...) from the model's generation_config.json. This client sends
  neutral penalties, min_p 0 and top-k -1 (off) explicitly so the distribution is exactly logits/temperature.

Streaming (`stream`, used for streamed harness requests): the same request with `"stream": true`; vLLM answers
server-sent events, one `CompletionStreamResponse` per step, whose `choices[0]` carries the step's new
`token_ids` and their `logprobs.token_logprobs`, and on the last one the `finish_reason`; then `data: [DONE]`.
A failure mid-stream is a `data: {"error": ...}` event.

LoRA (`load_adapter`): the adapter directory goes to `POST /v1/load_lora_adapter` (`{"lora_name", "lora_path"}`,
a server started with `--enable-lora --max-lora-rank R` and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`) under a new
name per policy version; requests then name it as their `model`, and the previous adapter is unloaded
(`/v1/unload_lora_adapter`). The proxy is paused while this happens, so no call is in flight on the old one.

Untested against a real vLLM server until a GPU run exists; the parsers are tested against vLLM response
bodies and streams in vLLM's schema (tests/fixtures/vllm/, whose README says which are captured and which are
constructed) and the client against `openforge serve-model`, which speaks this subset of vLLM's API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from openforge.core import FinishReason, SamplingParams
from openforge.inference.base import (
    BackendError,
    GenerationContext,
    GenerationResult,
    SampledToken,
    clamp_max_tokens,
)
from openforge.inference.remote import RemoteBackend, adapter_name

_FINISH = {"stop": FinishReason.stop, "length": FinishReason.length}


def completion_request(
    model: str, prompt_ids: list[int], sampling: SamplingParams, max_tokens: int, *, stream: bool = False
) -> dict[str, Any]:
    """The body of `POST /v1/completions` for one token-id prompt."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(prompt_ids),
        "max_tokens": max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else -1,  # -1: off, in every vLLM release
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "n": 1,
        "stream": stream,
        "echo": False,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,  # the ids, as `token_id:<id>` in logprobs.tokens (no prompt echo)
        "skip_special_tokens": False,
        "stop_token_ids": list(sampling.stop_token_ids),
    }
    if sampling.stop:
        body["stop"] = list(sampling.stop)
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    return body


def parse_completion(body: Any) -> tuple[list[int], list[float], FinishReason]:
    """(output ids, their logprobs, finish reason) from a `/v1/completions` response body."""
    try:
        choice = body["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise BackendError(f"vLLM answered without choices: {str(body)[:300]}") from None
    logprobs = choice.get("logprobs") or {}
    ids = choice.get("token_ids")
    if ids is None:
        ids = _ids_from_tokens(logprobs.get("tokens"))
    values = logprobs.get("token_logprobs")
    if values is None:
        raise BackendError("vLLM answered without logprobs.token_logprobs (was `logprobs` dropped from the request?)")
    if len(values) != len(ids) or any(v is None for v in values):
        raise BackendError(f"vLLM answered {len(ids)} token ids but {len(values)} logprobs (or null ones)")
    reason = choice.get("finish_reason")
    if reason not in _FINISH:
        raise BackendError(f"vLLM finished the request with {reason!r} (aborted or failed), not stop/length")
    return [int(i) for i in ids], [float(v) for v in values], _FINISH[reason]


def parse_stream_chunk(body: Any) -> tuple[list[int], list[float], FinishReason | None]:
    """(new ids, their logprobs, finish reason or None) from one event of a streamed `/v1/completions`."""
    if isinstance(body, dict) and body.get("error") is not None:
        error = body["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise BackendError(f"vLLM failed the request mid-stream: {message}")
    choices = body.get("choices") if isinstance(body, dict) else None
    if choices is None:
        raise BackendError(f"vLLM streamed an event without choices: {str(body)[:300]}")
    if not choices:  # the usage event
        return [], [], None
    choice = choices[0]
    logprobs = choice.get("logprobs") or {}
    ids = choice.get("token_ids")
    if ids is None:
        ids = _ids_from_tokens(logprobs.get("tokens")) if logprobs.get("tokens") else []
    values = logprobs.get("token_logprobs") or []
    if len(values) != len(ids) or any(v is None for v in values):
        raise BackendError(f"vLLM streamed {len(ids)} token ids but {len(values)} logprobs (or null ones)")
    reason = choice.get("finish_reason")
    if reason is not None and reason not in _FINISH:
        raise BackendError(f"vLLM finished the request with {reason!r} (aborted or failed), not stop/length")
    return [int(i) for i in ids], [float(v) for v in values], _FINISH.get(reason)


def _ids_from_tokens(tokens: list[str] | None) -> list[int]:
    prefix = "token_id:"
    if not tokens or not all(isinstance(t, str) and t.startswith(prefix) for t in tokens):
        raise BackendError(
            "vLLM answered without the sampled ids: logprobs.tokens should be `token_id:<id>` strings "
            "(return_tokens_as_token_ids, which OpenForge asks for) or choices[0].token_ids should be present"
        )
    return [int(t[len(prefix) :]) for t in tokens]


class VLLMBackend(RemoteBackend):
    """`base_url`: the server root (e.g. http://gpu-node:8000), without /v1.

    `model`: the served model name (default: the first of GET /v1/models). `max_context`: the served context
    length (default: `max_model_len` from GET /v1/models, else this value until the server is reached).
    """

    server_name = "vLLM"

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        max_context: int | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        api_key: str | None = None,
    ):
        super().__init__(
            base_url, max_context=max_context, timeout=timeout, connect_timeout=connect_timeout, api_key=api_key
        )
        self.model = model
        self.adapter: str | None = None  # the LoRA adapter requests name, once one is loaded

    async def _served_model(self) -> str:
        """The model name requests carry: the loaded LoRA adapter's, else the one given, else the server's
        first (learned by `connect`)."""
        await self.connect()
        assert self.model is not None  # connect() has set it, or raised
        return self.adapter or self.model

    async def connect(self) -> None:
        """Ask the server for its model name and context length (done once, before the first call)."""
        if self._server_checked:
            return
        body = await self.http.get("/v1/models")
        models = body.get("data") if isinstance(body, dict) else None
        if not models:
            raise BackendError(f"vLLM at {self.base_url} serves no model (GET /v1/models: {str(body)[:200]})")
        card = next((m for m in models if m.get("id") == self.model), None) if self.model else models[0]
        if card is None:
            raise BackendError(
                f"vLLM at {self.base_url} does not serve {self.model!r}; it serves {[m.get('id') for m in models]}"
            )
        self.model = card["id"]
        if card.get("max_model_len"):
            self._max_context = int(card["max_model_len"])
        self._server_checked = True

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> GenerationResult:
        model = await self._served_model()
        self.check_request(prompt_ids, sampling)
        # vLLM refuses (400) prompt + max_tokens beyond its context instead of stopping there: clamp first.
        max_tokens = clamp_max_tokens(len(prompt_ids), sampling, self.max_context)
        body = await self.http.post("/v1/completions", completion_request(model, prompt_ids, sampling, max_tokens))
        ids, logprobs, finish = parse_completion(body)
        return GenerationResult(
            output_ids=ids, logprobs=logprobs, finish_reason=finish, policy_version=self.policy_version
        )

    streams_tokens = True

    async def stream(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> AsyncIterator[SampledToken | GenerationResult]:
        model = await self._served_model()
        self.check_request(prompt_ids, sampling)
        max_tokens = clamp_max_tokens(len(prompt_ids), sampling, self.max_context)
        body = completion_request(model, prompt_ids, sampling, max_tokens, stream=True)
        events = self.http.events("/v1/completions", body)
        async for item in self._tokens(events, lambda event, so_far: parse_stream_chunk(event)):
            yield item

    async def load_weights(self, path: str) -> int:
        raise NotImplementedError(
            "vLLM's OpenAI server has no endpoint to reload weights from a directory over plain HTTP. "
            "Restart `vllm serve` on the new model directory, or push weights from the trainer with vLLM's "
            "weight-transfer routes (VLLM_SERVER_DEV_MODE=1, --weight-transfer-config; NCCL/IPC, not HTTP), "
            "or train with veRL, whose server manager updates the rollout weights in place. "
            "(The sglang backend can reload from a directory: /update_weights_from_disk.)"
        )

    async def load_adapter(self, path: str) -> int:
        await self.connect()
        name = adapter_name(self.policy_version + 1)
        await self.http.post_text("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        old, self.adapter = self.adapter, name
        self.policy_version += 1
        if old is not None:  # nothing is in flight on it: the proxy is paused while weights change
            await self.http.post_text("/v1/unload_lora_adapter", {"lora_name": old})
        return self.policy_version

    async def close(self) -> None:
        await self.http.aclose()
