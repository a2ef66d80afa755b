"""The contract every dialect module implements: wire bytes ⇄ canonical types, and nothing about tokens.

A dialect turns a harness's request body into a `DecodedRequest` (a canonical `Conversation` plus the few
wire facts the reply needs), and turns the proxy's `Reply` back into that harness's response body, SSE
event stream, or error shape. The proxy app (routing, episodes, rendering, recording) sits on top.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from openforge.core import Conversation, FinishReason, ParsedOutput

# How several text blocks / content parts of one wire message become one canonical `content` string.
# One separator for every dialect, so the same conversation reads the same whichever API carried it.
BLOCK_SEPARATOR = "\n\n"

# What a non-text input (image, audio, file) becomes: the policy reads text only, and refusing the whole
# request would end a harness's episode over one screenshot.
IMAGE_PLACEHOLDER = "[image omitted: this model reads text only]"
FILE_PLACEHOLDER = "[file omitted: this model reads text only]"
AUDIO_PLACEHOLDER = "[audio omitted: this model reads text only]"

# Canonical error kinds and the status each suggests; a dialect may map a kind to its own status
# (OpenAI has no 529: "overloaded" is a 503 there).
ERROR_STATUS: dict[str, int] = {
    "invalid_request": 400,
    "prompt_too_long": 400,
    "authentication": 401,
    "not_found": 404,
    "request_too_large": 413,
    "rate_limit": 429,
    "api_error": 500,
    "overloaded": 529,
}


class DialectError(Exception):
    """A request the proxy refuses (or a failure it reports) in a dialect-neutral form.

    `kind` is one of `ERROR_STATUS`'s keys; `param` names the offending request field (a path such as
    `messages[2].content[0].tool_use_id`) when there is one. Dialects render it with `Dialect.error`.
    """

    def __init__(self, status: int, kind: str, message: str, param: str | None = None):
        if kind not in ERROR_STATUS:
            raise ValueError(f"unknown error kind {kind!r}; expected one of {sorted(ERROR_STATUS)}")
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.param = param

    @classmethod
    def invalid(cls, message: str, param: str | None = None) -> "DialectError":
        return cls(400, "invalid_request", message, param)

    @classmethod
    def prompt_too_long(cls, prompt_tokens: int, max_tokens: int) -> "DialectError":
        # Claude Code looks for exactly this phrase to decide to compact; OpenAI dialects add their code.
        return cls(400, "prompt_too_long", f"prompt is too long: {prompt_tokens} tokens > {max_tokens} maximum")

    def __repr__(self) -> str:
        return f"DialectError({self.status}, {self.kind!r}, {self.message!r}, param={self.param!r})"


@dataclass(frozen=True)
class ToolRoute:
    """How a call to one canonical tool goes back on the wire (OpenAI Responses only).

    Responses `namespace` tools are flattened into canonical tools named `namespace.name`; a call to one
    must come back as `{"namespace": ..., "name": ...}`. Freeform `custom` tools take a raw string, which
    the canonical call carries as `arguments["input"]`.
    """

    name: str
    namespace: str | None = None
    kind: Literal["function", "custom"] = "function"


@dataclass
class DecodedRequest:
    """A harness request in canonical form, plus the wire facts the reply needs.

    - `side_call`: no tools were offered (title generation, summaries, small-model calls).
    - `max_tokens_requested`: the harness's own limit (`max_tokens`, `max_output_tokens`,
      `max_completion_tokens`), None when it set none; `conversation.sampling.max_tokens` holds it too
      (or the canonical default) — the proxy clamps it to what the context allows.
    - `include_usage`: Chat Completions `stream_options.include_usage` (the other dialects always report usage).
    - `tool_choice`: "auto" | "none" | "required" | "tool" (then `forced_tool` names the tool).
    - `reasoning_requested`: the harness asked for thinking (True), asked for none (False), or did not say.
    - `dropped_tools`: server-side / built-in tools the request offered that OpenForge cannot run
      (web search, hosted shells): they are not in `conversation.tools`.
    - `tool_routes`: Responses only, canonical tool name → how to encode a call to it.
    - `raw`: the parsed JSON body.
    """

    conversation: Conversation
    model: str
    dialect: str
    stream: bool = False
    include_usage: bool = False
    side_call: bool = False
    max_tokens_requested: int | None = None
    tool_choice: Literal["auto", "none", "required", "tool"] = "auto"
    forced_tool: str | None = None
    parallel_tool_calls: bool = True
    reasoning_requested: bool | None = None
    dropped_tools: list[str] = field(default_factory=list)
    tool_routes: dict[str, ToolRoute] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Reply:
    """What the proxy hands a dialect to encode: one finished model turn.

    `id` is unique per reply (Claude Code merges replies that share an id); tool-call ids inside `output`
    are the proxy's too. `stop_sequence` names the stop string that ended the turn, if one did;
    `reasoning_tokens` is how many of `completion_tokens` were reasoning (0 when unknown).
    """

    id: str
    model: str
    output: ParsedOutput
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    created: int
    stop_sequence: str | None = None
    reasoning_tokens: int = 0

    @property
    def truncated(self) -> bool:
        """The turn ended because it ran out of tokens, not because the model finished it."""
        return self.finish_reason == FinishReason.length


class Dialect(abc.ABC):
    """One wire format. Instances are stateless; `DIALECTS` holds one of each."""

    name: ClassVar[str]
    routes: ClassVar[tuple[str, ...]]  # request paths, without the optional `/e/{key}` prefix

    @abc.abstractmethod
    def decode(self, body: bytes, *, for_count: bool = False) -> DecodedRequest:
        """Parse and check a request body. Raises `DialectError` (400) naming the field at fault.

        `for_count`: the body is a token-count request (Anthropic `count_tokens`), so generation-only
        fields such as `max_tokens` are not required.
        """

    @abc.abstractmethod
    def encode(self, reply: Reply, request: DecodedRequest) -> dict[str, Any]:
        """The non-streaming response body."""

    @abc.abstractmethod
    def stream(self, reply: Reply, request: DecodedRequest, *, chunk_chars: int | None = None) -> list[bytes]:
        """The complete SSE stream for a reply, terminator included, one event per item.

        `chunk_chars` splits text, reasoning and tool arguments into deltas of at most that many
        characters (None: one delta each) — the content is the same either way.
        """

    @abc.abstractmethod
    def error(self, err: DialectError) -> tuple[int, dict[str, Any]]:
        """HTTP status and body of an error, in this dialect's own error shape."""

    @abc.abstractmethod
    def error_stream(self, err: DialectError, *, response_id: str | None = None) -> bytes:
        """An error as SSE, for a stream whose 200 status is already sent. `response_id` is used by
        dialects whose in-stream error carries a response object (Responses)."""

    @abc.abstractmethod
    def encode_request(self, conversation: Conversation, *, model: str = "openforge", stream: bool = False) -> dict:
        """The request body a client of this dialect would send for `conversation` (tests, teachers)."""

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"


def stop_kind(reply: Reply) -> Literal["length", "tool_calls", "stop_sequence", "stop"]:
    """Why the turn ended, in the terms every dialect maps from."""
    if reply.truncated:
        return "length"
    if reply.output.tool_calls:
        return "tool_calls"
    if reply.stop_sequence:
        return "stop_sequence"
    return "stop"
