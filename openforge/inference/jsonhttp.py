"""The HTTP plumbing shared by the remote backends (vLLM, SGLang, upstream model APIs): JSON in, JSON (or a
stream of JSON server-sent events) out, clear errors.

- connection refused, DNS, timeouts, bodies that are not JSON, 5xx → BackendError naming the server;
- 400 / 422 (the server refused the request itself) → InvalidRequestError with the server's message.

One `httpx.AsyncClient` per event loop: a client's pooled connections belong to the loop that opened them.
Cancelling a call closes its connection, which is how vLLM and SGLang learn to abort the request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from openforge.inference.base import BackendError, BackendSpecError, InvalidRequestError


class JSONClient:
    def __init__(
        self,
        base_url: str,
        *,
        server: str,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise BackendSpecError(f"{server} URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.server = server
        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.headers.update(headers or {})  # e.g. Anthropic's x-api-key and anthropic-version
        self._clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        self._drains: set[asyncio.Task[None]] = set()  # streams read on past `[DONE]` (`events`)

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        for other in [lp for lp in self._clients if lp.is_closed()]:
            self._clients.pop(other)  # its loop is gone; the connections went with it
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = httpx.AsyncClient(timeout=self.timeout, headers=self.headers)
        return client

    async def get(self, path: str) -> Any:
        return await self._request("GET", path, None)

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        return await self._request("POST", path, body)

    async def post_text(self, path: str, body: dict[str, Any]) -> str:
        """POST `body`, answered by plain text (vLLM's admin routes, e.g. /v1/load_lora_adapter)."""
        return (await self._send("POST", path, body)).text

    async def _send(self, method: str, path: str, body: dict[str, Any] | None) -> httpx.Response:
        url = f"{self.base_url}{path}"
        try:
            response = await self._client().request(method, url, json=body)
        except httpx.HTTPError as exc:
            raise self._failure(url, exc) from None
        self._check_status(url, response)
        return response

    async def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        url = f"{self.base_url}{path}"
        response = await self._send(method, path, body)
        try:
            return response.json()
        except json.JSONDecodeError:
            raise BackendError(
                f"{self.server} at {url} answered with a body that is not JSON: {response.text[:200]!r}"
            ) from None

    async def events(self, path: str, body: dict[str, Any]) -> AsyncIterator[Any]:
        """POST `body` and yield the JSON of each `data:` line of the server-sent events that answer it, up to
        `data: [DONE]` or the end of the stream. Leaving the iteration early closes the connection (the server
        then aborts the request); after `[DONE]` the rest of the body is read in the background, so that the
        connection goes back to the pool for the next call without this one waiting for the server to end it."""
        url = f"{self.base_url}{path}"
        client = self._client()
        response: httpx.Response | None = None
        try:
            response = await client.send(client.build_request("POST", url, json=body), stream=True)
            if response.status_code >= 400:
                await response.aread()
                self._check_status(url, response)
            lines = response.aiter_lines()
            async for line in lines:
                if not line.startswith("data:"):
                    continue  # event names, comments, keep-alives
                data = line[5:].strip()
                if data == "[DONE]":
                    self._drain_later(response, lines)
                    response = None
                    return
                try:
                    yield json.loads(data)
                except json.JSONDecodeError:
                    raise BackendError(
                        f"{self.server} at {url} streamed an event that is not JSON: {data[:200]!r}"
                    ) from None
        except httpx.HTTPError as exc:
            raise self._failure(url, exc) from None
        finally:
            if response is not None:
                await response.aclose()

    def _drain_later(self, response: httpx.Response, lines: AsyncIterator[str]) -> None:
        task = asyncio.get_running_loop().create_task(_drain(response, lines))
        self._drains.add(task)  # held until done: the loop keeps only weak references to its tasks
        task.add_done_callback(self._drains.discard)

    def _failure(self, url: str, exc: httpx.HTTPError) -> BackendError:
        if isinstance(exc, httpx.TimeoutException):
            return BackendError(f"{self.server} at {url} did not answer within {self.timeout.read:g} s (timeout)")
        if isinstance(exc, httpx.ConnectError):
            return BackendError(f"cannot connect to {self.server} at {url}: {exc or 'connection refused'}")
        return BackendError(f"{self.server} at {url} failed: {type(exc).__name__}: {exc}")

    def _check_status(self, url: str, response: httpx.Response) -> None:
        if response.status_code in (400, 413, 422):
            raise InvalidRequestError(
                f"{self.server} refused the request ({response.status_code}): {_message(response)}"
            )
        if response.status_code >= 400:
            raise BackendError(f"{self.server} at {url} answered {response.status_code}: {_message(response)}")

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        for task in [t for t in self._drains if t.get_loop() is loop]:  # another loop's tasks are its own
            task.cancel()
        clients, self._clients = list(self._clients.items()), {}
        for loop, client in clients:
            if loop is asyncio.get_running_loop():
                await client.aclose()


async def _drain(response: httpx.Response, lines: AsyncIterator[str], within_s: float = 5.0) -> None:
    """Read what a server sends after `[DONE]` (normally only the end of the body), then release the
    connection: back to the pool when the body ended, closed when it did not end within `within_s`."""
    try:
        async with asyncio.timeout(within_s):
            async for _ in lines:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass
    finally:
        await response.aclose()


def _message(response: httpx.Response) -> str:
    """The error text of an OpenAI-style (`{"error": {"message": ...}}`) or FastAPI (`{"detail": ...}`) body."""
    try:
        body = response.json()
    except json.JSONDecodeError:
        return response.text[:500]
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])
        for key in ("message", "detail", "error"):
            if key in body:
                return str(body[key])
    return str(body)[:500]
