"""The proxy's two ASGI apps: the model API that harnesses call, and the admin API that only the
orchestrator reaches (a separate listener by default, so a sandbox that reaches the model API cannot
create episodes, swap weights or read other episodes).

Model API routes (declared by the dialects, `openforge.dialects`), each also under a `/e/{key}` prefix for
harnesses that cannot set an API key:
    POST /v1/messages (any query string), POST /v1/messages/count_tokens   Anthropic Messages
    POST /v1/responses, POST /responses                                    OpenAI Responses
    POST /v1/chat/completions, POST /chat/completions                      OpenAI Chat Completions
    GET  /v1/models, HEAD / and GET /
Admin API (Authorization: Bearer <admin token>):
    POST /admin/episodes {"task": ..., "harness": ...} → {"episode_id", "key"}
    GET  /admin/episodes/{id}, POST /admin/episodes/{id}/end
    POST /admin/pause, POST /admin/resume, POST /admin/weights {"path": DIR}, GET /admin/status
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from openforge.core.errors import RequestError
from openforge.dialects import DIALECTS, MODELS_ROUTE, Dialect, DialectError, is_anthropic_client, model_list
from openforge.models import ModelDirError
from openforge.proxy.calls import CallResponse
from openforge.proxy.episodes import LATE_BODY_KEPT
from openforge.proxy.service import ProxyService

Endpoint = Callable[[Request], Awaitable[Response]]  # a route's handler


class BodyTooLarge(RequestError):
    pass


class BodyTooSlow(RequestError):
    pass


async def read_body(request: Request, limit: int, timeout_s: float | None = None) -> bytes:
    """The request body, refusing more than `limit` bytes without buffering them all, and a body that has not
    arrived within `timeout_s` (a client sending it a byte at a time holds a connection and its buffer)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdecimal() and len(declared) < 20 and int(declared) > limit:
        raise BodyTooLarge()
    chunks, size = [], 0

    async def receive() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge()
            chunks.append(chunk)

    try:
        await asyncio.wait_for(receive(), timeout_s)
    except TimeoutError:
        raise BodyTooSlow() from None
    return b"".join(chunks)


def episode_key(request: Request) -> str | None:
    key = request.path_params.get("key")
    if key:
        return key
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return request.headers.get("x-api-key") or None


def to_http(response: CallResponse) -> Response:
    headers = {"cache-control": "no-cache", **response.headers}
    if response.stream is not None:
        return StreamingResponse(
            response.stream, status_code=response.status, media_type="text/event-stream", headers=headers
        )
    if response.chunks is not None:
        chunks = response.chunks

        async def stream() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

        return StreamingResponse(stream(), status_code=response.status, media_type="text/event-stream", headers=headers)
    return JSONResponse(response.body, status_code=response.status, headers=response.headers)


def model_api(service: ProxyService) -> Starlette:
    settings = service.settings

    def reject(dialect: Dialect, status: int, kind: str, message: str) -> Response:
        return to_http(service.error_response(dialect, DialectError(status, kind, message)))

    def too_large(dialect: Dialect) -> Response:
        return reject(dialect, 413, "request_too_large", f"request body exceeds {settings.max_body_bytes} bytes")

    def too_slow(dialect: Dialect) -> Response:
        response = reject(
            dialect, 408, "request_timeout", f"the request body did not arrive within {settings.body_timeout_s:g} s"
        )
        response.headers["connection"] = "close"
        return response

    async def body_of(request: Request) -> bytes:
        return await read_body(request, settings.max_body_bytes, settings.body_timeout_s)

    def model_call(dialect: Dialect) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            key = episode_key(request)
            if not key:
                return reject(dialect, 401, "authentication", "no API key: send the episode key as the API key")
            episode = service.registry.by_key(key)
            if episode is None:
                refused = reject(dialect, 401, "authentication", "invalid API key: unknown or ended episode key")
                late = await asyncio.to_thread(service.registry.ended_by_key, key)  # a store read: off the loop
                if late is not None:  # a process the agent left behind: refused, recorded, never trained on
                    try:
                        body = await read_body(request, LATE_BODY_KEPT, settings.body_timeout_s)
                    except (BodyTooLarge, BodyTooSlow):
                        body = b""
                    await asyncio.to_thread(
                        service.registry.record_late_call, late, dialect.name, body, bytes(refused.body)
                    )
                return refused
            try:
                body = await body_of(request)
            except BodyTooLarge:
                return too_large(dialect)
            except BodyTooSlow:
                return too_slow(dialect)
            # `x-stainless-retry-count` (the Stainless SDKs' retry counter) is deliberately not read: a retry
            # is recognised by its body (`ProxyService` replays the reply to a body it has already answered),
            # which holds for every harness, while only some send the header and a retry with a changed
            # body is a new call whatever it says. Unread, no value of it can make a request fail.
            return to_http(await service.handle(dialect, body, episode))

        return endpoint

    def count_tokens(dialect: Dialect) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            key = episode_key(request)
            if not key or service.registry.by_key(key) is None:
                return reject(dialect, 401, "authentication", "invalid API key: unknown or ended episode key")
            try:
                body = await body_of(request)
                decoded = await service.decode(dialect, body, for_count=True)
            except BodyTooLarge:
                return too_large(dialect)
            except BodyTooSlow:
                return too_slow(dialect)
            except DialectError as err:
                return to_http(service.error_response(dialect, err))
            # The floor first: a body that cannot fit the context is not worth tokenizing (16 MB took 78 s).
            floor = service.token_floor(decoded.conversation)
            if floor >= service.backend.max_context:
                return reject(
                    dialect,
                    400,
                    "prompt_too_long",
                    f"prompt is too long: at least {floor} tokens > {service.backend.max_context} maximum",
                )
            try:
                ids = await asyncio.to_thread(service.model.render, decoded.conversation)
            except ModelDirError as e:
                return reject(
                    dialect, 400, "invalid_request", f"the model's chat template cannot render this conversation: {e}"
                )
            return JSONResponse(dialect.encode_count(len(ids)))

        return endpoint

    async def models(request: Request) -> Response:
        return JSONResponse(model_list(service.served_model, anthropic=is_anthropic_client(request.headers)))

    async def root(request: Request) -> Response:
        return JSONResponse({"service": "openforge-proxy", "model": service.served_model})

    routes = []
    for prefix in ("", "/e/{key}"):
        for dialect in DIALECTS.values():
            routes += [Route(prefix + path, model_call(dialect), methods=["POST"]) for path in dialect.routes]
            routes += [Route(prefix + path, count_tokens(dialect), methods=["POST"]) for path in dialect.count_routes]
        routes += [
            Route(prefix + MODELS_ROUTE, models, methods=["GET"]),
            Route(prefix + "/", root, methods=["GET", "HEAD"]),
        ]
    return Starlette(routes=routes)


def admin_api(service: ProxyService, admin_token: str) -> Starlette:
    def authorised(request: Request) -> bool:
        auth = request.headers.get("authorization", "")
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        return bool(given) and hmac.compare_digest(given.encode(), admin_token.encode())

    def denied() -> Response:
        return JSONResponse({"error": "admin token required (Authorization: Bearer <admin token>)"}, status_code=401)

    async def json_body(request: Request) -> dict:
        try:
            data = json.loads(await read_body(request, 1024 * 1024) or b"{}")
        except (ValueError, BodyTooLarge) as e:
            raise ValueError(f"body must be a JSON object: {e}") from None
        if not isinstance(data, dict):
            raise ValueError("body must be a JSON object")
        return data

    def admin(handler: Endpoint) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            if not authorised(request):
                return denied()
            try:
                return await handler(request)
            except ValueError as e:
                return JSONResponse({"error": str(e)}, status_code=400)

        return endpoint

    async def create_episode(request: Request) -> Response:
        data = await json_body(request)
        harness = data.get("harness")
        if harness is not None and not isinstance(harness, str):
            raise ValueError("harness must be a string")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ValueError("metadata must be an object")
        episode = service.registry.create(task=data.get("task"), harness=harness, metadata=metadata)
        return JSONResponse({"episode_id": episode.id, "key": episode.key}, status_code=201)

    async def get_episode(request: Request) -> Response:
        episode = service.registry.get(request.path_params["episode_id"])
        if episode is None:
            return JSONResponse({"error": "no such episode"}, status_code=404)
        out = episode.model_dump(mode="json", exclude={"key"})
        out["calls"] = service.registry.store.count_calls(episode.id)
        return JSONResponse(out)

    async def end_episode(request: Request) -> Response:
        episode = service.registry.end(request.path_params["episode_id"])
        if episode is None:
            return JSONResponse({"error": "no such episode"}, status_code=404)
        service.forget(episode.id)
        return JSONResponse({"episode_id": episode.id, "state": episode.state.value})

    async def pause(request: Request) -> Response:
        started = time.monotonic()
        await service.gate.close()
        return JSONResponse({"paused": True, "drained_s": round(time.monotonic() - started, 3)})

    async def resume(request: Request) -> Response:
        service.gate.open()
        return JSONResponse({"paused": False})

    async def weights(request: Request) -> Response:
        data = await json_body(request)
        path = data.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError('"path" (a model directory) is required')
        adapter = data.get("adapter", False)
        if not isinstance(adapter, bool):
            raise ValueError('"adapter" is true (path is a LoRA adapter in PEFT\'s format) or false')
        try:
            backend = service.backend
            version = await (backend.load_adapter(path) if adapter else backend.load_weights(path))
        except NotImplementedError as e:
            return JSONResponse({"error": str(e)}, status_code=409)
        except (OSError, ValueError) as e:
            return JSONResponse({"error": f"could not load weights from {path}: {e}"}, status_code=400)
        return JSONResponse({"policy_version": version})

    async def status(request: Request) -> Response:
        return JSONResponse(
            {
                "paused": service.gate.paused,
                "policy_version": service.backend.policy_version,
                "model": service.served_model,
                "calls": service.registry.store.count_calls(),
            }
        )

    return Starlette(
        routes=[
            Route("/admin/episodes", admin(create_episode), methods=["POST"]),
            Route("/admin/episodes/{episode_id}", admin(get_episode), methods=["GET"]),
            Route("/admin/episodes/{episode_id}/end", admin(end_episode), methods=["POST"]),
            Route("/admin/pause", admin(pause), methods=["POST"]),
            Route("/admin/resume", admin(resume), methods=["POST"]),
            Route("/admin/weights", admin(weights), methods=["POST"]),
            Route("/admin/status", admin(status), methods=["GET"]),
        ]
    )


def combined_api(service: ProxyService, admin_token: str) -> Starlette:
    """Model and admin routes on one listener (`--admin-listen` equal to `--listen`, for local use)."""
    return Starlette(routes=list(admin_api(service, admin_token).routes) + list(model_api(service).routes))
