"""What one connection may take from the proxy: its headers within a time limit, and a place among at most
`max_connections` per listener.

uvicorn has neither: a client that opens a connection and sends nothing, or sends its headers a byte at a
time (slowloris), holds a file descriptor and a buffer for as long as it likes, and enough of them exhaust the
process's descriptors — every episode's harness then fails to connect. `guarded_protocol` wraps uvicorn's HTTP
protocol class:

- the request line and headers must arrive within `header_timeout_s` of the connection opening, or of the
  first byte of the next request on a kept-alive connection; otherwise the proxy answers 408 and closes;
- a connection past the listener's `max_connections` is answered 503 and closed at once (the SDKs retry a
  503 with back-off);
- the body's own time limit is `app.read_body`'s (`body_timeout_s`), since the body is read by the app.
Headers are bounded in size by h11 (16 KiB) before any of this.
"""

from __future__ import annotations

import asyncio
import json
import resource

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol


def _raw_response(status: int, reason: str, message: str) -> bytes:
    # Readable by both API families' SDKs: Anthropic's error object, with the `error.message` OpenAI's read.
    body = json.dumps(
        {
            "type": "error",
            "error": {"type": "overloaded_error" if status == 503 else "invalid_request_error", "message": message},
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


def guarded_protocol(header_timeout_s: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with a header deadline and a connection cap (pass as `uvicorn.Config(http=...)`)."""
    too_slow = _raw_response(
        408, "Request Timeout", f"the request headers did not arrive within {header_timeout_s:g} s"
    )
    too_many = _raw_response(
        503,
        "Service Unavailable",
        f"the proxy holds {max_connections} connections on this listener already; retry shortly",
    )

    # uvicorn types AutoHTTPProtocol as a variable (`type[asyncio.Protocol]`: h11's or httptools' class)
    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        app: ASGIApp  # uvicorn's, set by its __init__; wrapped below

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self._deadline: asyncio.TimerHandle | None = None
            self._in_request = False
            inner: ASGIApp = self.app

            async def app(scope: Scope, receive: Receive, send: Send) -> None:  # once a request's headers are in
                self._disarm()
                self._in_request = True
                try:
                    await inner(scope, receive, send)
                finally:
                    self._in_request = False

            self.app = app

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(too_many)
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            if not self._in_request and self._deadline is None:
                self._arm()  # the first bytes of the next request on a kept-alive connection
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(header_timeout_s, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _headers_too_slow(self) -> None:
            self._deadline = None
            if not self._in_request and not self.transport.is_closing():
                self.transport.write(too_slow)
                self.transport.close()

    return GuardedHTTPProtocol


def raise_open_file_limit(wanted: int) -> int:
    """Raise this process's soft limit on open files towards `wanted` (never above the hard limit); returns
    the limit in force. The connection caps are meant to be what bounds the proxy, not a default of 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
        except (ValueError, OSError):
            return soft
    return soft
