"""Helpers for proxy tests: an in-process proxy (real service, store, dialects; ASGI transport) and SDK
clients pointed at it. No tests here."""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anthropic
import httpx2
import openai

from openforge.inference import make_backend
from openforge.models import ModelDir
from openforge.proxy.app import admin_api, model_api
from openforge.proxy.episodes import EpisodeRegistry
from openforge.proxy.service import ProxyService, ProxySettings
from openforge.store import TrajectoryStore
from openforge.store.writer import AsyncCallWriter
from support.paths import POLICIES

ADMIN_TOKEN = "test-admin-token"
BASE = "http://proxy.test"


@dataclass
class InProcessProxy:
    service: ProxyService
    store: TrajectoryStore
    model_app: object
    admin_app: object

    def http(self, app=None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app or self.model_app), base_url=BASE)

    def admin(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=self.admin_app),
            base_url=BASE,
            headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
        )

    async def new_episode(self, task=None, harness="test") -> tuple[str, str]:
        async with self.admin() as admin:
            r = await admin.post("/admin/episodes", json={"task": task, "harness": harness})
            assert r.status_code == 201, r.text
            data = r.json()
            return data["episode_id"], data["key"]

    def anthropic(self, key: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(api_key=key, base_url=BASE, http_client=self.http(), max_retries=0)

    def openai(self, key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key=key, base_url=BASE + "/v1", http_client=self.http(), max_retries=0)


@asynccontextmanager
async def in_process_proxy(run_dir: Path, model_dir: Path, backend: str = "scripted", **settings):
    model = ModelDir(model_dir)
    if backend == "scripted":
        backend = f"scripted:{POLICIES / 'echo_tool_loop.py'}"
    be = make_backend(backend, model)
    store = TrajectoryStore.open(run_dir)
    writer = AsyncCallWriter(store)
    service = ProxyService(model, be, EpisodeRegistry(store), writer, ProxySettings(served_model="tiny", **settings))
    try:
        yield InProcessProxy(service, store, model_api(service), admin_api(service, ADMIN_TOKEN))
    finally:
        await writer.aclose()
        await be.close()
        store.close()
