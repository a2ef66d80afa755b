"""The running proxy's episode API (what episode runners and the trainer use instead of its internals), and its
one settings object: `ProxyConfig` extends `ProxySettings`."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from openforge.core import TaskPayload
from openforge.proxy.server import ProxyConfig, running_proxy
from openforge.proxy.service import ProxySettings

from support.paths import POLICIES


def test_proxy_config_extends_the_settings_it_serves_with(tmp_path):
    config = ProxyConfig(model=tmp_path, run=tmp_path / "run", temperature=0.5, max_new_tokens=7, max_messages=9)
    assert config.proxy_settings() == ProxySettings(temperature=0.5, max_new_tokens=7, max_messages=9)
    with pytest.raises(ValidationError, match="max_new_tokens"):
        ProxyConfig(model=tmp_path, run=tmp_path / "run", max_new_tokens=0)


async def test_episode_api_creates_serves_and_ends_an_episode(tmp_path, tiny_model_dir):
    config = ProxyConfig(model=tiny_model_dir, backend=f"scripted:{POLICIES / 'echo_tool_loop.py'}",
                         run=tmp_path / "run", listen="127.0.0.1:0", admin_listen="127.0.0.1:0")
    payload = TaskPayload(id="t1", instruction="do it", solution="touch x", shell_tool=("bash", "command"))
    async with running_proxy(config) as proxy:
        assert proxy.served_model == tiny_model_dir.name  # the model directory's name unless configured
        episode = proxy.create_episode(payload, harness="react", metadata={"sample": 2, "step": 4})
        stored = proxy.store.get_episode(episode.id)
        assert stored.task == "t1" and stored.sample == 2 and stored.metadata["step"] == 4
        assert TaskPayload.from_json(stored.metadata["task"]) == payload  # what backends are handed
        body = {"model": proxy.served_model, "messages": [{"role": "user", "content": "hi"}]}
        headers = {"authorization": f"Bearer {episode.key}"}
        async with httpx.AsyncClient(base_url=proxy.url) as client:
            assert (await client.post("/v1/chat/completions", json=body, headers=headers)).status_code == 200
            proxy.end_episode(episode.id)
            assert (await client.post("/v1/chat/completions", json=body, headers=headers)).status_code == 401
        assert len(proxy.store.list_calls(episode.id)) == 1  # what was recorded stays


def test_a_task_posted_by_another_orchestrator_is_read_by_its_known_fields():
    assert TaskPayload.from_json({"name": "n", "solution": "s", "extra": 1}) == TaskPayload(id="n", solution="s")
    assert TaskPayload.from_json("plain-name") is None
    assert TaskPayload.from_json({"id": "t", "shell_tool": "bash"}) is None  # wrong type: not a payload
