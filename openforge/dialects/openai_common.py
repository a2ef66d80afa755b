"""What OpenAI's two dialects (Responses, Chat Completions) read and write the same way.

The error object `{"error": {"message", "type", "param", "code"}}`: a prompt past the context is code
`context_length_exceeded` (what Codex and OpenAI-compatible harnesses look for to compact); OpenAI has
no 529, so "overloaded" is a 503, which the SDKs raise as InternalServerError and retry. And the request
fields both spell alike: `tool_choice` modes and the JSON output format.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from openforge.core.json_types import JSONObject
from openforge.dialects import wire
from openforge.dialects.errors import DialectError
from openforge.dialects.images import Parts, RequestImage

_OPENAI_ERRORS: dict[str, tuple[int, str, str | None]] = {
    "invalid_request": (400, "invalid_request_error", None),
    "prompt_too_long": (400, "invalid_request_error", "context_length_exceeded"),
    "authentication": (401, "invalid_request_error", "invalid_api_key"),
    "not_found": (404, "invalid_request_error", "not_found"),
    "request_timeout": (408, "invalid_request_error", "request_timeout"),
    "request_too_large": (413, "invalid_request_error", "request_too_large"),
    "rate_limit": (429, "requests", "rate_limit_exceeded"),
    "api_error": (500, "server_error", "server_error"),
    "overloaded": (503, "server_error", "server_is_overloaded"),
}


def openai_error(err: DialectError, *, context_param: str) -> tuple[int, JSONObject]:
    status, kind, code = _OPENAI_ERRORS[err.kind]
    param = err.param if err.param is not None else (context_param if err.kind == "prompt_too_long" else None)
    return status, {"error": {"message": err.message, "type": kind, "param": param, "code": code}}


def openai_error_code(err: DialectError) -> str | None:
    """The `code` of `err`'s error object (None for a plain invalid request)."""
    return _OPENAI_ERRORS[err.kind][2]


def tool_choice(data: dict) -> str | dict[str, Any]:
    """`tool_choice` as a mode ("auto", "none", "required"; absent is "auto"), or the object that names a tool."""
    choice = data.get("tool_choice")
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice in ("auto", "none", "required"):
            return choice
        raise wire.bad("tool_choice", f"must be 'auto', 'none', 'required' or an object, got {choice!r}")
    return wire.need_object(choice, "tool_choice")


def add_part(
    parts: Parts,
    part: Any,
    path: str,
    texts: Collection[str],
    media: Mapping[str, str],
    image_kind: str,
    read_image: Callable[[dict[str, Any], str], RequestImage],
) -> None:
    """One content part into `parts`: a text kind's `text`, a refusal's `refusal`, an image (the part of type
    `image_kind`, read by `read_image`), a placeholder for other media."""
    part = wire.need_object(part, path)
    kind = wire.req_str(part, "type", path)
    if kind in texts:
        parts.text(wire.req_str(part, "text", path))
    elif kind == "refusal":
        parts.text(wire.req_str(part, "refusal", path))
    elif kind == image_kind:
        parts.image(read_image(part, path))
    elif kind in media:
        parts.text(media[kind])
    else:
        raise wire.bad(wire.at(path, "type"), f"unsupported content part type {kind!r}")


def response_format(fmt: dict | None, path: str, json_schema: Callable[[dict], dict]) -> dict | None:
    """The JSON schema a requested output format asks for (None for plain text); `json_schema` reads the
    schema out of a `json_schema` format, which the two dialects nest differently."""
    if fmt is None:
        return None
    kind = wire.req_str(fmt, "type", path)
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        return json_schema(fmt)
    raise wire.bad(wire.at(path, "type"), f"must be 'text', 'json_object' or 'json_schema', got {kind!r}")


# The values and ranges of OpenAI's API reference (platform.openai.com/docs/api-reference, as the SDK's
# `ReasoningEffort`, `Reasoning` and create-params docstrings carry them): reasoning effort, summary,
# penalties "between -2.0 and 2.0", top_logprobs "an integer between 0 and 20".
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
REASONING_SUMMARIES = ("auto", "concise", "detailed")


def check_ranges(data: dict, *, penalties: bool) -> None:
    """The range checks both OpenAI dialects share (temperature, top_p and token limits are read with the
    sampling parameters): `top_logprobs`, and for Chat Completions the two penalties."""
    top_logprobs = wire.opt_int(data, "top_logprobs", "", minimum=0)
    if top_logprobs is not None and top_logprobs > 20:
        raise wire.bad("top_logprobs", f"must be between 0 and 20, got {top_logprobs}")
    if penalties:
        for name in ("presence_penalty", "frequency_penalty"):
            wire.opt_number(data, name, "", minimum=-2.0, maximum=2.0)
