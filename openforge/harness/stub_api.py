"""A loopback *stub of the model APIs* (not the proxy): answers every model call with a fixed reply.

It exists to check that a harness binary starts, finds its configuration, sends a request of the expected
shape with the episode key, and exits cleanly after a text answer -- without a model or the real proxy
(`openforge/proxy` is the real thing and is tested on its own). Standard library only; listens on 127.0.0.1.

Dialects served (paths with or without the `/v1` prefix):

- Anthropic Messages: `POST /v1/messages` (SSE when `stream` is true, JSON otherwise),
  `POST /v1/messages/count_tokens`, `GET /v1/models`, `HEAD /` and `GET /`;
- OpenAI Responses: `POST /v1/responses` (SSE ending with `response.completed` with usage, or JSON);
- OpenAI Chat Completions: `POST /v1/chat/completions` (SSE with a usage chunk and `[DONE]`, or JSON).

Every request is kept in `StubModelAPI.requests` (method, path, query, headers with lower-case names, parsed
JSON body) so a test can assert what the harness sent.

`script` makes the stub answer model calls in order: a `str` is a plain-text reply, a `{"name": ...,
"arguments": {...}}` dict is one tool call (`stop_reason` tool_use / a `function_call` item / `tool_calls`),
a `{"status": 401, "message": ...}` dict an HTTP error in the dialect's error shape; once the script is used
up, every further call gets `reply`. That is enough to check that a harness executes
its own shell tool and sends the result back -- not a policy.

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
    def start(self) -> "StubModelAPI":
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

    def __enter__(self) -> "StubModelAPI":
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

    def _peek(self) -> str | dict[str, Any]:
        with self._lock:
            return self.script[self._step] if self._step < len(self.script) else self.reply

    def _next_step(self) -> str | dict[str, Any]:
        """The reply for the next model call: the next script item, then `reply` for ever."""
        with self._lock:
            step = self.script[self._step] if self._step < len(self.script) else self.reply
            self._step += 1
            return step


class _Handler(BaseHTTPRequestHandler):
    api: StubModelAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    # -- plumbing ----------------------------------------------------------------------------------------
    def _read(self) -> RecordedRequest:
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
        return req

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, Any]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in events:
            payload = data if isinstance(data, str) else json.dumps(data)
            chunk = (f"event: {name}\n" if name else "") + f"data: {payload}\n\n"
            self.wfile.write(chunk.encode())
            self.wfile.flush()
        self.close_connection = True

    # -- routes ------------------------------------------------------------------------------------------
    def do_HEAD(self) -> None:  # noqa: N802
        self._read()
        self._json({})

    def do_GET(self) -> None:  # noqa: N802
        req = self._read()
        if req.path.rstrip("/").endswith("/models"):
            self._json({"data": [{"id": "stub", "type": "model", "object": "model", "display_name": "stub",
                                  "created_at": "2025-01-01T00:00:00Z", "created": 0, "owned_by": "openforge"}],
                        "object": "list", "has_more": False, "first_id": "stub", "last_id": "stub"})
        else:
            self._json({"ok": True})

    def do_POST(self) -> None:  # noqa: N802
        req = self._read()
        body = req.body if isinstance(req.body, dict) else {}
        path = req.path.rstrip("/")
        model_call = path.endswith(("/messages", "/responses", "/chat/completions"))
        if model_call and isinstance(self.api._peek(), dict) and "status" in self.api._peek():
            self._error(path, self.api._next_step())  # type: ignore[arg-type]
        elif path.endswith("/messages/count_tokens"):
            self._json({"input_tokens": max(1, req.raw_size // 4)})
        elif path.endswith("/messages"):
            self._anthropic(body)
        elif path.endswith("/responses"):
            self._responses(body)
        elif path.endswith("/chat/completions"):
            self._chat(body)
        else:
            self._json({"error": {"type": "not_found_error", "message": f"stub: no route {req.path}"}}, 404)

    def _error(self, path: str, step: dict[str, Any]) -> None:
        status, message = int(step["status"]), str(step.get("message") or "stub error")
        if path.endswith("/messages"):
            kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                    429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
            self._json({"type": "error", "error": {"type": kind, "message": message}}, status)
        else:
            kind = {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(
                status, "server_error")
            self._json({"error": {"message": message, "type": kind, "param": None, "code": kind}}, status)

    # -- Anthropic Messages ------------------------------------------------------------------------------
    def _anthropic(self, body: dict) -> None:
        step, model = self.api._next_step(), body.get("model", "stub")
        n = self.api._next_id()
        msg_id = f"msg_stub{n:06d}"
        usage = {"input_tokens": 10, "output_tokens": 2, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if isinstance(step, dict):
            args = json.dumps(step.get("arguments") or {})
            block = {"type": "tool_use", "id": f"toolu_stub{n:06d}", "name": step["name"], "input": {}}
            full_block = {**block, "input": step.get("arguments") or {}}
            delta = {"type": "input_json_delta", "partial_json": args}
            stop = "tool_use"
        else:
            block, full_block = {"type": "text", "text": ""}, {"type": "text", "text": step}
            delta = {"type": "text_delta", "text": step}
            stop = "end_turn"
        if not body.get("stream"):
            self._json({"id": msg_id, "type": "message", "role": "assistant", "model": model,
                        "content": [full_block], "stop_reason": stop, "stop_sequence": None, "usage": usage})
            return
        start = {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
                 "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 0}}
        self._sse([
            ("message_start", {"type": "message_start", "message": start}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 2}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    # -- OpenAI Responses --------------------------------------------------------------------------------
    def _responses(self, body: dict) -> None:
        step, model = self.api._next_step(), body.get("model", "stub")
        n = self.api._next_id()
        resp_id, item_id = f"resp_stub{n:06d}", f"msg_stub{n:06d}"
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12}
        base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model,
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}}}
        if isinstance(step, dict):
            args = json.dumps(step.get("arguments") or {})
            item = {"id": f"fc_stub{n:06d}", "type": "function_call", "status": "completed",
                    "call_id": f"call_stub{n:06d}", "name": step["name"], "arguments": args}
            done = {**base, "status": "completed", "output": [item], "usage": usage}
            if not body.get("stream"):
                self._json(done)
                return
            seq = itertools.count()
            self._sse([(name, {"type": name, "sequence_number": next(seq), **data}) for name, data in [
                ("response.created", {"response": {**base, "status": "in_progress", "output": []}}),
                ("response.output_item.added", {"output_index": 0,
                                                "item": {**item, "status": "in_progress", "arguments": ""}}),
                ("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": 0,
                                                            "delta": args}),
                ("response.function_call_arguments.done", {"item_id": item["id"], "output_index": 0,
                                                           "arguments": args}),
                ("response.output_item.done", {"output_index": 0, "item": item}),
                ("response.completed", {"response": done}),
            ]])
            return
        text = step
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
        done = {**base, "status": "completed", "output": [item], "usage": usage}
        if not body.get("stream"):
            self._json(done)
            return
        seq = itertools.count()
        self._sse([(name, {"type": name, "sequence_number": next(seq), **data}) for name, data in [
            ("response.created", {"response": {**base, "status": "in_progress", "output": []}}),
            ("response.in_progress", {"response": {**base, "status": "in_progress", "output": []}}),
            ("response.output_item.added", {"output_index": 0,
                                            "item": {**item, "status": "in_progress", "content": []}}),
            ("response.content_part.added", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                             "part": {**part, "text": ""}}),
            ("response.output_text.delta", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                            "delta": text, "logprobs": []}),
            ("response.output_text.done", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                           "text": text, "logprobs": []}),
            ("response.content_part.done", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                            "part": part}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
            ("response.completed", {"response": done}),
        ]])

    # -- OpenAI Chat Completions -------------------------------------------------------------------------
    def _chat(self, body: dict) -> None:
        step, model = self.api._next_step(), body.get("model", "stub")
        n = self.api._next_id()
        cid, created = f"chatcmpl-stub{n:06d}", int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        if isinstance(step, dict):
            call = {"id": f"call_stub{n:06d}", "type": "function",
                    "function": {"name": step["name"], "arguments": json.dumps(step.get("arguments") or {})}}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
            deltas = [{"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]}]
        else:
            message, finish = {"role": "assistant", "content": step}, "stop"
            deltas = [{"role": "assistant", "content": ""}, {"content": step}]
        if not body.get("stream"):
            self._json({"id": cid, "object": "chat.completion", "created": created, "model": model,
                        "choices": [{"index": 0, "finish_reason": finish, "message": message}], "usage": usage})
            return

        def chunk(delta: dict, finish: str | None = None, **extra: Any) -> tuple[None, dict]:
            choices = [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None else []
            return (None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": choices, **extra})

        events = [chunk(d) for d in deltas] + [chunk({}, finish)]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(chunk(None, usage=usage))  # type: ignore[arg-type]
        events.append((None, "[DONE]"))
        self._sse(events)
