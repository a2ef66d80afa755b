"""A proxy serving in this event loop on real sockets (uvicorn on 127.0.0.1:0): what the streaming and limit
tests need, since an in-process ASGI transport buffers whole responses. No tests here."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

import anthropic
import openai

from openforge.proxy.server import ProxyConfig, RunningProxy, running_proxy
from support.paths import POLICIES


@asynccontextmanager
async def live_proxy(tmp_path: Path, model_dir: Path, backend: str | None = None, **settings):
    """`backend`: a backend spec (default: the gated streaming policy, tests/policies/gated_stream.py)."""
    config = ProxyConfig(
        model=model_dir,
        backend=backend or f"scripted:{POLICIES / 'gated_stream.py'}",
        run=tmp_path / "run",
        listen="127.0.0.1:0",
        admin_listen="127.0.0.1:0",
        served_model="tiny",
        **settings,
    )
    async with running_proxy(config) as proxy:
        yield proxy


def anthropic_client(proxy: RunningProxy, key: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key=key, base_url=proxy.url, max_retries=0, timeout=60)


def openai_client(proxy: RunningProxy, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=key, base_url=proxy.url + "/v1", max_retries=0, timeout=60)
