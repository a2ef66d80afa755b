"""The OpenAI error object, shared by Responses and Chat Completions.

`{"error": {"message", "type", "param", "code"}}`. A prompt past the context is code
`context_length_exceeded` (what Codex and OpenAI-compatible harnesses look for to compact); OpenAI has
no 529, so "overloaded" is a 503, which the SDKs raise as InternalServerError and retry.
"""

from __future__ import annotations

from typing import Any

from openforge.dialects.base import DialectError

_OPENAI_ERRORS: dict[str, tuple[int, str, str | None]] = {
    "invalid_request": (400, "invalid_request_error", None),
    "prompt_too_long": (400, "invalid_request_error", "context_length_exceeded"),
    "authentication": (401, "invalid_request_error", "invalid_api_key"),
    "not_found": (404, "invalid_request_error", "not_found"),
    "request_too_large": (413, "invalid_request_error", "request_too_large"),
    "rate_limit": (429, "requests", "rate_limit_exceeded"),
    "api_error": (500, "server_error", "server_error"),
    "overloaded": (503, "server_error", "server_is_overloaded"),
}


def openai_error(err: DialectError, *, context_param: str) -> tuple[int, dict[str, Any]]:
    status, kind, code = _OPENAI_ERRORS[err.kind]
    param = err.param if err.param is not None else (context_param if err.kind == "prompt_too_long" else None)
    return status, {"error": {"message": err.message, "type": kind, "param": param, "code": code}}
