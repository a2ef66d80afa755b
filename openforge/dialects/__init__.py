"""Dialects: each harness wire format ⇄ OpenForge's canonical conversation, with no knowledge of tokens.

    DIALECTS["anthropic"]          Anthropic Messages      POST /v1/messages
    DIALECTS["responses"]          OpenAI Responses        POST /v1/responses (and /responses)
    DIALECTS["chat_completions"]   OpenAI Chat Completions POST /v1/chat/completions (and /chat/completions)

`base` holds the contract (Dialect, DecodedRequest, Reply, DialectError); `wire` the safe body parsing
and SSE framing they share; `history` the tool-call bookkeeping.
"""

from __future__ import annotations

from openforge.dialects.anthropic import AnthropicMessages
from openforge.dialects.base import (
    BLOCK_SEPARATOR,
    ERROR_STATUS,
    DecodedRequest,
    Dialect,
    DialectError,
    Reply,
    ToolRoute,
)
from openforge.dialects.chat_completions import ChatCompletions
from openforge.dialects.responses import OpenAIResponses

DIALECTS: dict[str, Dialect] = {d.name: d for d in (AnthropicMessages(), OpenAIResponses(), ChatCompletions())}

# Request path → dialect. The `/e/{key}` prefix and any query string (`?beta=true`) are not part of it.
ROUTES: dict[str, Dialect] = {route: dialect for dialect in DIALECTS.values() for route in dialect.routes}


def dialect_for_path(path: str) -> Dialect | None:
    """The dialect serving a request path, ignoring a query string, an `/e/{key}/` prefix and a trailing slash."""
    path = path.split("?", 1)[0].rstrip("/")
    if path.startswith("/e/"):
        path = "/" + path[3:].partition("/")[2]
    return ROUTES.get(path)


__all__ = [
    "BLOCK_SEPARATOR",
    "DIALECTS",
    "ERROR_STATUS",
    "ROUTES",
    "AnthropicMessages",
    "ChatCompletions",
    "DecodedRequest",
    "Dialect",
    "DialectError",
    "OpenAIResponses",
    "Reply",
    "ToolRoute",
    "dialect_for_path",
]
