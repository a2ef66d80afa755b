"""`sglang`: a client of SGLang's native `/generate` endpoint, token ids in and token ids + logprobs out.

It posts `{"input_ids": [...], "sampling_params": {...}, "return_logprob": true}` and reads
`meta_info.output_token_logprobs` — one `[logprob, token_id, text_or_null]` triple per sampled token — and
`meta_info.finish_reason` (`{"type": "stop" | "length" | "abort", ...}`).

SGLang's returned logprobs are those of the distribution after temperature (what OpenForge records), unless
the server runs with SGLANG_RETURN_ORIGINAL_LOGPROB set (then before temperature: leave it unset). The seed
(`sampling_seed`) is honoured only by servers started with `--enable-deterministic-inference`.
`load_weights(path)` uses SGLang's documented `/update_weights_from_disk`; `load_adapter(path)` (LoRA, a server
started with `--enable-lora --max-lora-rank R --lora-target-modules ...`) posts `/load_lora_adapter`
(`{"lora_name", "lora_path"}`) under a new name per policy version, names it in every `/generate` request
(`lora_path`) and unloads the one before (`/unload_lora_adapter`).

Streaming (`stream`): the same request with `"stream": true`; SGLang answers server-sent events, each a
`/generate` answer so far, then `data: [DONE]`. By default each event is cumulative (the whole output so far:
`meta_info.output_token_logprobs` grows); a server started with `--incremental-streaming-output` sends only
what is new. `connect()` reads which from `/get_server_info`.

Untested against a real SGLang server until a GPU run exists; the parsers are tested against SGLang response
bodies and streams (tests/fixtures/sglang/, whose README says which are captured and which are constructed).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, overload

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


def generate_request(
    prompt_ids: list[int],
    sampling: SamplingParams,
    max_new_tokens: int,
    *,
    stream: bool = False,
    adapter: str | None = None,
) -> dict[str, Any]:
    """The body of `POST /generate` for one token-id prompt."""
    params: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else -1,  # -1: off
        "min_p": 0.0,
        "max_new_tokens": max_new_tokens,
        "stop_token_ids": list(sampling.stop_token_ids),
        "skip_special_tokens": False,
        "no_stop_trim": True,  # keep a matched stop string's tokens: they were sampled
    }
    if sampling.stop:
        params["stop"] = list(sampling.stop)
    if sampling.seed is not None:
        params["sampling_seed"] = sampling.seed
    body = {"input_ids": list(prompt_ids), "sampling_params": params, "return_logprob": True, "stream": stream}
    if adapter is not None:
        body["lora_path"] = adapter  # the name it was loaded under
    return body


@overload
def parse_generate(
    body: Any, *, finished: Literal[True] = True
) -> tuple[list[int], list[float], FinishReason]: ...  # a finished answer always says why


@overload
def parse_generate(body: Any, *, finished: bool) -> tuple[list[int], list[float], FinishReason | None]: ...


def parse_generate(body: Any, *, finished: bool = True) -> tuple[list[int], list[float], FinishReason | None]:
    """(output ids, their logprobs, finish reason) from a `/generate` response body. `finished=False`: one
    event of a stream, whose finish reason is null until the last."""
    if isinstance(body, list):  # a batch answer; we send one prompt
        if len(body) != 1:
            raise BackendError(f"SGLang answered {len(body)} results for one prompt")
        body = body[0]
    meta = body.get("meta_info") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        raise BackendError(f"SGLang answered without meta_info: {str(body)[:300]}")
    triples = meta.get("output_token_logprobs")
    if triples is None:
        raise BackendError("SGLang answered without meta_info.output_token_logprobs (was return_logprob dropped?)")
    try:
        logprobs = [float(t[0]) for t in triples]
        ids = [int(t[1]) for t in triples]
    except (TypeError, IndexError, ValueError):
        raise BackendError(
            f"SGLang's output_token_logprobs are not [logprob, token_id, text] triples: {str(triples)[:200]}"
        ) from None
    output_ids = body.get("output_ids")
    if isinstance(output_ids, list) and output_ids and output_ids != ids:
        raise BackendError("SGLang's output_ids disagree with the ids in output_token_logprobs")
    reason = meta.get("finish_reason")
    kind = reason.get("type") if isinstance(reason, dict) else reason
    if kind is None and not finished:
        return ids, logprobs, None
    if kind not in _FINISH:
        detail = reason.get("message") if isinstance(reason, dict) else None
        raise BackendError(
            f"SGLang finished the request with {kind!r}{f': {detail}' if detail else ''}, not stop/length"
        )
    return ids, logprobs, _FINISH[kind]


class SGLangBackend(RemoteBackend):
    """`base_url`: the server root (e.g. http://gpu-node:30000). `max_context`: the served context length
    (default: `context_length` / `max_total_num_tokens` from GET /get_model_info or /get_server_info)."""

    server_name = "SGLang"

    def __init__(
        self,
        base_url: str,
        *,
        max_context: int | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        api_key: str | None = None,
    ):
        super().__init__(
            base_url, max_context=max_context, timeout=timeout, connect_timeout=connect_timeout, api_key=api_key
        )
        self.incremental_stream = False  # learned from the server by connect()
        self.adapter: str | None = None  # the LoRA adapter requests name, once one is loaded

    async def connect(self) -> None:
        if self._server_checked:
            return
        try:
            info = await self.http.get("/get_server_info")
        except BackendError:
            if self._max_context is None:
                raise
            info = {}  # the context length was given; streams then take SGLang's default (cumulative) form
        info = info if isinstance(info, dict) else {}
        if self._max_context is None:
            length = info.get("context_length")
            if not length:
                raise BackendError(f"SGLang at {self.base_url} did not say its context_length; pass max_context")
            self._max_context = int(length)
        self.incremental_stream = bool(info.get("incremental_streaming_output", False))
        self._server_checked = True

    streams_tokens = True

    async def stream(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> AsyncIterator[SampledToken | GenerationResult]:
        await self.connect()
        self.check_request(prompt_ids, sampling)
        max_new = clamp_max_tokens(len(prompt_ids), sampling, self.max_context)
        events = self.http.events(
            "/generate", generate_request(prompt_ids, sampling, max_new, stream=True, adapter=self.adapter)
        )
        async for item in self._tokens(events, self._stream_step):
            yield item

    def _stream_step(self, event: Any, so_far: list[int]) -> tuple[list[int], list[float], FinishReason | None]:
        ids, logprobs, reason = parse_generate(event, finished=False)
        if not self.incremental_stream:  # the output so far: what is new is what follows what we have
            if ids[: len(so_far)] != so_far:
                raise BackendError("SGLang's streamed output does not extend what it streamed before")
            ids, logprobs = ids[len(so_far) :], logprobs[len(so_far) :]
        return ids, logprobs, reason

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> GenerationResult:
        await self.connect()
        self.check_request(prompt_ids, sampling)
        max_new = clamp_max_tokens(len(prompt_ids), sampling, self.max_context)
        body = await self.http.post("/generate", generate_request(prompt_ids, sampling, max_new, adapter=self.adapter))
        ids, logprobs, finish = parse_generate(body)
        return GenerationResult(
            output_ids=ids, logprobs=logprobs, finish_reason=finish, policy_version=self.policy_version
        )

    async def load_weights(self, path: str) -> int:
        body = await self.http.post("/update_weights_from_disk", {"model_path": str(path)})
        if not (isinstance(body, dict) and body.get("success")):
            message = body.get("message") if isinstance(body, dict) else body
            raise BackendError(f"SGLang could not load weights from {path}: {message}")
        self.policy_version += 1
        return self.policy_version

    async def load_adapter(self, path: str) -> int:
        name = adapter_name(self.policy_version + 1)
        body = await self.http.post("/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        if not (isinstance(body, dict) and body.get("success")):
            message = (body.get("error_message") or body.get("message")) if isinstance(body, dict) else body
            raise BackendError(f"SGLang could not load the LoRA adapter {path}: {message}")
        old, self.adapter = self.adapter, name
        self.policy_version += 1
        if old is not None:  # nothing is in flight on it: the proxy is paused while weights change
            await self.http.post("/unload_lora_adapter", {"lora_name": old})
        return self.policy_version

    async def close(self) -> None:
        await self.http.aclose()
