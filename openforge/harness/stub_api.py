"""A loopback *stub of the model APIs* (not the proxy): answers every model call with a fixed reply.

It exists to check that a harness binary starts, finds its configuration, sends a request of the expected
shape with the episode key, and exits cleanly after a text answer -- without a model or the real proxy
(`openforge/proxy` is the real thing and is tested on its own). Standard-library HTTP on 127.0.0.1; the wire
formats are the proxy's own (`openforge.dialects`): each request is decoded, and each reply, stream and
error encoded, by the dialect of its route, so a request the proxy would refuse is refused here too (400).

Routes (the dialects' own, under any prefix; any API key is accepted):

- Anthropic Messages: `POST /v1/messages` (SSE when `stream` is true, JSON otherwise),
  `POST /v1/messages/count_tokens`;
- OpenAI Responses: `POST /v1/responses`, `POST /responses`;
- OpenAI Chat Completions: `POST /v1/chat/completions`, `POST /chat/completions`;
- `GET /v1/models`, `HEAD /` and `GET /`.

Every request is kept in `StubModelAPI.requests` (method, path, query, headers with lower-case names, parsed
JSON body) so a test can assert what the harness sent.

`script` makes the stub answer model calls in order: a `str` is a plain-text reply, a `{"name": ...,
"arguments": {...}}` dict is one tool call (`stop_reason` tool_use / a `function_call` item / `tool_calls`),
a `{"status": 401, "message": ...}` dict an HTTP error with that status in the dialect's error shape; once the
script is used up, every further call gets `reply`. Every reply reports 10 prompt and 2 completion tokens.
That is enough to check that a harness executes its own shell tool and sends the result back -- not a policy.

    with StubModelAPI(reply="done") as api:
        ...run the harness against api.base_url...
        assert api.requests_to("/v1/messages")
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from openforge.core import FinishReason, ParsedOutput, ToolCall
from openforge.dialects import (
    COUNT_ROUTES,
    DIALECTS,
    MODELS_ROUTE,
    Dialect,
    DialectError,
    Reply,
    dialect_for_path,
    is_anthropic_client,
    model_list,
)
from openforge.dialects.wire import dumps

__all__ = ["RecordedRequest", "StubModelAPI"]


@dataclass
class RecordedRequest:
    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]  # lower-case names
    body: Any = None  # parsed JSON, or the raw text when it is not JSON, or None
    raw_size: int = 0

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def bearer(self) -> str | None:
        auth = self.header("authorization") or ""
        return auth[7:] if auth.lower().startswith("bearer ") else None


@dataclass
class StubModelAPI:
    """Serve fixed replies in the three dialects on 127.0.0.1 (a background thread)."""

    reply: str | dict[str, Any] = "OK"
    script: list[str | dict[str, Any]] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._step = 0

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> StubModelAPI:
        stub = self

        class Handler(_Handler):
            api = stub

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-model-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StubModelAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, without `/v1` (adapters add it where their harness needs it)."""
        return f"http://{self.host}:{self.port}"

    # -- queries -----------------------------------------------------------------------------------------
    def requests_to(self, path_suffix: str, method: str = "POST") -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path.endswith(path_suffix)]

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _next_step(self) -> str | dict[str, Any]:
        """The reply for the next model call: the next script item, then `reply` for ever."""
        with self._lock:
            step = self.script[self._step] if self._step < len(self.script) else self.reply
            self._step += 1
            return step

    def _reply(self, dialect: Dialect, step: str | dict[str, Any], model: str) -> Reply:
        """A script step as the reply a model would give, with ids in the dialect's style (`msg_stub000001`)."""
        stem = f"stub{self._next_id():06d}"
        if isinstance(step, dict):
            arguments = step.get("arguments") or {}
            call = ToolCall(id=f"{dialect.call_id_prefix}{stem}", name=step["name"], arguments=arguments)
            output = ParsedOutput(tool_calls=[call])
        else:
            output = ParsedOutput(content=step)
        return Reply(
            id=f"{dialect.reply_id_prefix}{stem}",
            model=model,
            output=output,
            finish_reason=FinishReason.stop,
            prompt_tokens=10,
            completion_tokens=2,
            created=int(time.time()),
        )


class _Handler(BaseHTTPRequestHandler):
    api: StubModelAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    # -- plumbing ----------------------------------------------------------------------------------------
    def _read(self) -> tuple[RecordedRequest, bytes]:
        parts = urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        req = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parts.query,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            raw_size=len(raw),
        )
        self.api._record(req)
        return req, raw

    def _json(self, obj: Any, status: int = 200) -> None:
        data = dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _sse(self, events: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for event in events:
            self.wfile.write(event)
            self.wfile.flush()
        self.close_connection = True

    def _error(self, dialect: Dialect, err: DialectError, status: int | None = None) -> None:
        default_status, body = dialect.error(err)
        self._json(body, status or default_status)

    # -- routes ------------------------------------------------------------------------------------------
    def do_HEAD(self) -> None:  # noqa: N802
        self._read()
        self._json({})

    def do_GET(self) -> None:  # noqa: N802
        req, _ = self._read()
        if req.path.rstrip("/").endswith(MODELS_ROUTE):
            self._json(model_list("stub", anthropic=is_anthropic_client(req.headers)))
        else:
            self._json({"ok": True})

    def do_POST(self) -> None:  # noqa: N802
        req, raw = self._read()
        dialect = dialect_for_path(req.path)
        counter = dialect_for_path(req.path, COUNT_ROUTES)
        if dialect is not None:
            self._model_call(dialect, raw)
        elif counter is not None:
            self._json(counter.encode_count(max(1, req.raw_size // 4)))
        else:
            self._error(DIALECTS["anthropic"], DialectError(404, "not_found", f"stub: no route {req.path}"))

    def _model_call(self, dialect: Dialect, raw: bytes) -> None:
        step = self.api._next_step()
        if isinstance(step, dict) and "status" in step:
            status = int(step["status"])
            self._error(dialect, DialectError.for_status(status, str(step.get("message") or "stub error")), status)
            return
        try:
            request = dialect.decode(raw)
        except DialectError as err:
            self._error(dialect, err)
            return
        reply = self.api._reply(dialect, step, request.model)
        if request.stream:
            self._sse(dialect.stream(reply, request))
        else:
            self._json(dialect.encode(reply, request))
