"""Run the proxy: build the service from a config, serve the model API and the admin API with uvicorn.

When it is up, the proxy writes `RUN_DIR/proxy.json` (mode 0600) with the addresses it really bound (port 0
picks a free one), its pid and the admin token, so an orchestrator on the same machine can find it.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
from pathlib import Path

import uvicorn
from pydantic import BaseModel, ConfigDict, Field, field_validator

from openforge.inference import make_backend
from openforge.models import ModelDir
from openforge.proxy.app import admin_api, combined_api, model_api
from openforge.proxy.episodes import EpisodeRegistry
from openforge.proxy.service import ProxyService, ProxySettings
from openforge.store import TrajectoryStore
from openforge.store.writer import AsyncCallWriter


class ProxyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: Path
    backend: str = "embedded"
    run: Path
    listen: str | None = "127.0.0.1:8100"
    uds: Path | None = None
    admin_listen: str | None = "127.0.0.1:8101"
    admin_uds: Path | None = None
    admin_token: str | None = None
    served_model: str | None = None
    max_new_tokens: int = Field(default=4096, ge=1)
    temperature: float | None = Field(default=None, ge=0.0)
    generation_timeout_s: float = Field(default=600.0, gt=0)

    @field_validator("listen", "admin_listen")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is None:
            return v
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"{v!r} is not HOST:PORT (e.g. 127.0.0.1:8100; port 0 picks a free one)")
        return v


def build_service(config: ProxyConfig) -> tuple[ProxyService, TrajectoryStore, AsyncCallWriter]:
    model = ModelDir(config.model)
    backend = make_backend(config.backend, config.model)
    store = TrajectoryStore.open(config.run)
    writer = AsyncCallWriter(store)
    settings = ProxySettings(
        served_model=config.served_model or model.path.name,
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature,
        generation_timeout_s=config.generation_timeout_s,
    )
    return ProxyService(model, backend, EpisodeRegistry(store), writer, settings), store, writer


def _uvicorn(app, address: str | None, uds: Path | None) -> uvicorn.Server:
    kwargs = {"uds": str(uds)} if uds else {"host": address.rpartition(":")[0], "port": int(address.rpartition(":")[2])}
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=75, **kwargs)
    return uvicorn.Server(config)


def _bound(server: uvicorn.Server, uds: Path | None) -> str:
    if uds:
        return f"unix:{uds}"
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    return f"http://{host}:{port}"


async def serve(config: ProxyConfig, ready: asyncio.Event | None = None) -> None:
    admin_token = config.admin_token or os.environ.get("OPENFORGE_ADMIN_TOKEN") or secrets.token_urlsafe(32)
    service, store, writer = build_service(config)
    connect = getattr(service.backend, "connect", None)  # remote backends learn the model name and context
    if connect is not None:
        await connect()
    same_listener = config.admin_uds is None and config.admin_listen == config.listen and config.uds is None
    if same_listener:
        servers = [_uvicorn(combined_api(service, admin_token), config.listen, None)]
    else:
        servers = [
            _uvicorn(model_api(service), config.listen, config.uds),
            _uvicorn(admin_api(service, admin_token), config.admin_listen, config.admin_uds),
        ]
    for s in servers:
        s.install_signal_handlers = lambda: None  # handled below, once for both
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, lambda: [setattr(s, "should_exit", True) for s in servers])
        except (NotImplementedError, RuntimeError):
            pass
    tasks = [asyncio.create_task(s.serve()) for s in servers]
    try:
        while not all(s.started for s in servers):
            if any(t.done() for t in tasks):
                for t in tasks:
                    if t.done() and t.exception():
                        raise t.exception()
                raise RuntimeError("the proxy could not start listening (see the log above)")
            await asyncio.sleep(0.01)
        info = {
            "pid": os.getpid(),
            "url": _bound(servers[0], None if same_listener else config.uds),
            "admin_url": _bound(servers[-1], None if same_listener else config.admin_uds),
            "admin_token": admin_token,
            "model": service.settings.served_model,
        }
        info_path = Path(config.run) / "proxy.json"
        info_path.write_text(json.dumps(info, indent=2))
        info_path.chmod(0o600)
        if ready is not None:
            ready.set()
        await asyncio.gather(*tasks)
    finally:
        for s in servers:
            s.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
        await writer.aclose()
        await service.backend.close()
        store.close()


def run_proxy(config: ProxyConfig) -> None:
    asyncio.run(serve(config))
