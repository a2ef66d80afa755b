"""Dialects: each harness wire format ⇄ OpenForge's canonical conversation, with no knowledge of tokens.

    DIALECTS["anthropic"]          Anthropic Messages      POST /v1/messages (+ /v1/messages/count_tokens)
    DIALECTS["responses"]          OpenAI Responses        POST /v1/responses (and /responses)
    DIALECTS["chat_completions"]   OpenAI Chat Completions POST /v1/chat/completions (and /chat/completions)

The one implementation of each format: the proxy, `openforge serve-model` and the harness tests' stub model
API decode requests and encode replies, streams and errors through these, and take their routes from here.
This room depends on `openforge.core` only. `base` holds the contract (Dialect, StreamEncoder,
DecodedRequest, Reply, DecodedReply); `errors` the dialect-neutral DialectError; `wire` the safe body parsing and SSE
framing they share; `history` the tool-call bookkeeping; `images` the decoding and checking of image parts
(screenshots); `openai_common` what the two OpenAI formats share; `catalog` the model listing. A format's
module decodes; `anthropic_output` and `responses_output` write those formats' replies, whole and as event
streams.
"""

from __future__ import annotations

from openforge.dialects.anthropic import AnthropicMessages
from openforge.dialects.base import (
    BLOCK_SEPARATOR,
    DecodedReply,
    DecodedRequest,
    Dialect,
    Reply,
    ReplyStart,
    StreamEncoder,
    ToolRoute,
    new_id,
)
from openforge.dialects.catalog import MODELS_ROUTE, is_anthropic_client, model_list
from openforge.dialects.chat_completions import ChatCompletions
from openforge.dialects.errors import ERROR_STATUS, DialectError
from openforge.dialects.responses import OpenAIResponses

DIALECTS: dict[str, Dialect] = {d.name: d for d in (AnthropicMessages(), OpenAIResponses(), ChatCompletions())}

# Request path → dialect, for model calls and for token counts. A server may mount them under a prefix
# (the proxy's `/e/{key}`); a query string (`?beta=true`) is not part of them.
ROUTES: dict[str, Dialect] = {route: dialect for dialect in DIALECTS.values() for route in dialect.routes}
COUNT_ROUTES: dict[str, Dialect] = {route: dialect for dialect in DIALECTS.values() for route in dialect.count_routes}


def dialect_for_path(path: str, routes: dict[str, Dialect] = ROUTES) -> Dialect | None:
    """The dialect serving a request path (by default a model call; `COUNT_ROUTES` for token counts). The
    path may carry a query string, a trailing slash and a mount prefix: it matches a route it ends with."""
    path = path.split("?", 1)[0].rstrip("/")
    matches = [route for route in routes if path == route or path.endswith(route)]  # routes start with "/"
    return routes[max(matches, key=len)] if matches else None


__all__ = [
    "BLOCK_SEPARATOR",
    "COUNT_ROUTES",
    "DIALECTS",
    "ERROR_STATUS",
    "MODELS_ROUTE",
    "ROUTES",
    "AnthropicMessages",
    "ChatCompletions",
    "DecodedReply",
    "DecodedRequest",
    "Dialect",
    "DialectError",
    "OpenAIResponses",
    "Reply",
    "ReplyStart",
    "StreamEncoder",
    "ToolRoute",
    "dialect_for_path",
    "is_anthropic_client",
    "model_list",
    "new_id",
]
