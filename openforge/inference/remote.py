"""What the HTTP clients of inference servers (vLLM, SGLang) share: the JSON client and the context length,
known from the constructor or learned from the server by `connect()`."""

from __future__ import annotations

from openforge.inference.base import Backend, BackendError
from openforge.inference.jsonhttp import JSONClient


class RemoteBackend(Backend):
    server_name = "the server"

    def __init__(self, base_url: str, *, max_context: int | None = None, timeout: float = 600.0,
                 connect_timeout: float = 10.0, api_key: str | None = None):
        self.http = JSONClient(base_url, server=self.server_name, timeout=timeout, connect_timeout=connect_timeout,
                               api_key=api_key)
        self._max_context = max_context
        self._server_checked = False

    @property
    def base_url(self) -> str:
        return self.http.base_url

    @property
    def max_context(self) -> int:
        if self._max_context is None:
            raise BackendError(f"{self.server_name}'s context length is unknown until the server is reached; "
                               "pass max_context")
        return self._max_context
