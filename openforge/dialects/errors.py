"""The dialect-neutral error: what the proxy refuses or fails, before a dialect puts it in its own shape."""

from __future__ import annotations

from openforge.core.errors import RequestError

# Canonical error kinds and the status each suggests; a dialect may map a kind to its own status
# (OpenAI has no 529: "overloaded" is a 503 there).
ERROR_STATUS: dict[str, int] = {
    "invalid_request": 400,
    "prompt_too_long": 400,
    "authentication": 401,
    "not_found": 404,
    "request_timeout": 408,
    "request_too_large": 413,
    "rate_limit": 429,
    "api_error": 500,
    "overloaded": 529,
}


class DialectError(RequestError):
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
    def invalid(cls, message: str, param: str | None = None) -> DialectError:
        return cls(400, "invalid_request", message, param)

    @classmethod
    def for_status(cls, status: int, message: str) -> DialectError:
        """The error an HTTP status stands for (a test double answering a scripted status): the first kind
        with that status; any other 5xx is an `api_error`, any other status an `invalid_request`."""
        kind = next((k for k, s in ERROR_STATUS.items() if s == status), None)
        return cls(status, kind or ("api_error" if status >= 500 else "invalid_request"), message)

    @classmethod
    def prompt_too_long(cls, prompt_tokens: int, max_tokens: int) -> DialectError:
        # Claude Code looks for exactly this phrase to decide to compact; OpenAI dialects add their code.
        return cls(400, "prompt_too_long", f"prompt is too long: {prompt_tokens} tokens > {max_tokens} maximum")

    def __repr__(self) -> str:
        return f"DialectError({self.status}, {self.kind!r}, {self.message!r}, param={self.param!r})"
