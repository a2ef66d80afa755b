"""`openai:URL` and `anthropic:URL`: a model behind an API as a backend — a teacher from another model family
(another tokenizer) through the same harness, or the task generator of `openforge tasks curate`.

- `openai:URL`: any OpenAI-compatible Chat Completions server (vLLM, SGLang, LiteLLM, a provider, `openforge
  serve-model`). URL is the `/v1` base URL, as an OpenAI SDK's `base_url`: calls go to `URL/chat/completions`.
- `anthropic:URL`: the Anthropic Messages API. URL is the API root (`https://api.anthropic.com`; a URL ending
  in `/v1` is accepted too): calls go to `.../v1/messages`.

The key comes from `OPENFORGE_UPSTREAM_API_KEY`, else `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` (none: no key is
sent, as a local server needs none). The upstream model is the `model` option, else
`OPENFORGE_UPSTREAM_MODEL`, else the one model the server lists (`GET .../models`; several: name one).

Requests are encoded and replies decoded by the dialects room (`Dialect.encode_request`, `decode_reply`): the
wire code the proxy itself serves. The whole reply is fetched (no streaming upstream); the proxy hands it to
the harness as its dialect's JSON or synthesised stream.
"""

from __future__ import annotations

import os
import time

from openforge.core import Conversation, SamplingParams
from openforge.dialects import DIALECTS, Dialect, DialectError
from openforge.inference.base import BackendError, GenerationContext, InvalidRequestError
from openforge.inference.jsonhttp import JSONClient
from openforge.inference.message import MessageBackend, MessageResult

KEY_ENV = "OPENFORGE_UPSTREAM_API_KEY"
MODEL_ENV = "OPENFORGE_UPSTREAM_MODEL"
ANTHROPIC_VERSION = "2023-06-01"


class UpstreamAPI:
    """What differs between the two upstream kinds: the dialect, the paths, how the key travels."""

    def __init__(self, kind: str, dialect: str, key_env: str, calls: str, models: str):
        self.kind, self.dialect, self.key_env = kind, dialect, key_env
        self.calls, self.models = calls, models

    def headers(self, key: str | None) -> dict[str, str]:
        if self.kind == "anthropic":
            return {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})}
        return {"Authorization": f"Bearer {key}"} if key else {}


UPSTREAMS = {
    "openai": UpstreamAPI("openai", "chat_completions", "OPENAI_API_KEY", "/chat/completions", "/models"),
    "anthropic": UpstreamAPI("anthropic", "anthropic", "ANTHROPIC_API_KEY", "/v1/messages", "/v1/models"),
}


def upstream_base(kind: str, url: str) -> str:
    """The base URL the paths of `kind` are appended to (an Anthropic URL given with `/v1` loses it)."""
    url = url.rstrip("/")
    if kind == "anthropic" and url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


class UpstreamBackend(MessageBackend):
    """A model behind an OpenAI-compatible or Anthropic API. `model`: the upstream's model name (see the
    module docstring for the defaults); `api_key`: overrides the environment."""

    def __init__(
        self,
        kind: str,
        url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
    ):
        if kind not in UPSTREAMS:
            raise InvalidRequestError(f"upstream kind {kind!r} is not one of {sorted(UPSTREAMS)}")
        self.api = UPSTREAMS[kind]
        self.dialect: Dialect = DIALECTS[self.api.dialect]
        self.url = url
        key = api_key or os.environ.get(KEY_ENV) or os.environ.get(self.api.key_env) or None
        self.http = JSONClient(
            upstream_base(kind, url),
            server=f"the upstream model at {url}",
            timeout=timeout,
            connect_timeout=connect_timeout,
            headers=self.api.headers(key),
        )
        self.model = model or os.environ.get(MODEL_ENV) or None

    @property
    def spec(self) -> str:
        return f"{self.api.kind}:{self.url}"

    async def connect(self) -> None:
        """Learn the model name when none was given: the one model the server lists."""
        if self.model:
            return
        body = await self.http.get(self.api.models)
        listed = body.get("data") if isinstance(body, dict) else None
        names = [m.get("id") for m in listed or [] if isinstance(m, dict) and m.get("id")]
        if len(names) != 1:
            raise BackendError(
                f"{self.spec}: name the upstream model with ${MODEL_ENV} (or the backend's `model` option); "
                f"the server lists {names or 'no model'}"
            )
        self.model = names[0]

    async def complete(
        self, conversation: Conversation, sampling: SamplingParams, ctx: GenerationContext
    ) -> MessageResult:
        await self.connect()
        assert self.model is not None  # connect() has learned it, or raised
        started = time.monotonic()
        request = conversation.model_copy(update={"sampling": sampling})
        body = await self.http.post(self.api.calls, self.dialect.encode_request(request, model=self.model))
        try:
            reply = self.dialect.decode_reply(body)
        except DialectError as e:
            raise BackendError(
                f"{self.spec} answered a reply that is not a {self.dialect.name} reply: {e.param or 'body'}: {e}"
            ) from None
        return MessageResult(
            output=reply.output,
            finish_reason=reply.finish_reason,
            model=reply.model or self.model,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            timings={"upstream_s": time.monotonic() - started},
        )

    async def close(self) -> None:
        await self.http.aclose()
