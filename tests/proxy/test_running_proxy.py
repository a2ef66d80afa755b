"""The running proxy's episode API (what episode runners and the trainer use instead of its internals), and its
one settings object: `ProxyConfig` extends `ProxySettings`."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from openforge.core import Outcome, TaskPayload
from openforge.proxy.server import ProxyConfig, running_proxy
from openforge.proxy.service import ProxySettings
from support.paths import POLICIES


def test_proxy_config_extends_the_settings_it_serves_with(tmp_path):
    config = ProxyConfig(model=tmp_path, run=tmp_path / "run", temperature=0.5, max_new_tokens=7, max_messages=9)
    assert config.proxy_settings() == ProxySettings(temperature=0.5, max_new_tokens=7, max_messages=9)
    with pytest.raises(ValidationError, match="max_new_tokens"):
        ProxyConfig(model=tmp_path, run=tmp_path / "run", max_new_tokens=0)


async def test_episode_api_creates_serves_and_ends_an_episode(tmp_path, tiny_model_dir):
    config = ProxyConfig(
        model=tiny_model_dir,
        backend=f"scripted:{POLICIES / 'echo_tool_loop.py'}",
        run=tmp_path / "run",
        listen="127.0.0.1:0",
        admin_listen="127.0.0.1:0",
    )
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
        answered, late = proxy.store.list_calls(episode.id)  # what was recorded stays; the late call is added
        assert answered.call_error is None and answered.output_ids and not answered.metadata.get("late")
        assert late.metadata == {"late": True} and late.call_error and late.index == 1


async def test_a_call_after_the_key_ended_is_refused_recorded_and_flagged(tmp_path, tiny_model_dir):
    """A process the agent left behind calls the model after its harness exited (the key ended): the dialect's
    own 401, a recorded call marked late, the episode flagged — and the assembler leaves the call out."""
    from openforge.proxy.episodes import LATE_CALLS_RECORDED
    from openforge.store import EpisodeQuery
    from openforge.train.assemble import assemble_run

    config = ProxyConfig(
        model=tiny_model_dir,
        backend=f"scripted:{POLICIES / 'echo_tool_loop.py'}",
        run=tmp_path / "run",
        listen="127.0.0.1:0",
        admin_listen="127.0.0.1:0",
    )
    async with running_proxy(config) as proxy:
        episode = proxy.create_episode(TaskPayload(id="t1", instruction="do it"), harness="claude-code")
        body = {"model": proxy.served_model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        headers = {"x-api-key": episode.key, "anthropic-version": "2023-06-01"}
        async with httpx.AsyncClient(base_url=proxy.url) as client:
            tool = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
            answered = await client.post(
                "/v1/chat/completions",
                json={**body, "tools": [tool]},
                headers={"authorization": f"Bearer {episode.key}"},
            )
            assert answered.status_code == 200
            proxy.end_episode(episode.id)  # the harness exited
            replies = [
                await client.post("/v1/messages", json=body, headers=headers) for _ in range(LATE_CALLS_RECORDED + 3)
            ]
        assert {r.status_code for r in replies} == {401}
        assert replies[0].json()["type"] == "error" and replies[0].json()["error"]["type"] == "authentication_error"
        calls = proxy.store.list_calls(episode.id)
        late = [c for c in calls if c.metadata.get("late")]
        assert len(late) == LATE_CALLS_RECORDED and len(calls) == LATE_CALLS_RECORDED + 1  # later ones: not kept
        assert all(c.dialect == "anthropic" and b'"hi"' in c.request_body and not c.output_ids for c in late)
        stored = proxy.store.get_episode(episode.id)
        assert stored.metadata["late_calls"] == LATE_CALLS_RECORDED
        proxy.store.update_episode(episode.id, outcome=Outcome.failed, reward=0.0)
        (row,) = proxy.store.query_episodes(EpisodeQuery(flagged_only=True)).rows
        assert row.flags == ("late_calls",)
        samples, metrics = assemble_run(proxy.store)
        assert metrics.calls_late == LATE_CALLS_RECORDED and metrics.calls_errored == 0, metrics
        assert [s.metadata["calls"] for s in samples] == [[0]], metrics


def test_a_task_posted_by_another_orchestrator_is_read_by_its_known_fields():
    assert TaskPayload.from_json({"name": "n", "solution": "s", "extra": 1}) == TaskPayload(id="n", solution="s")
    assert TaskPayload.from_json("plain-name") is None
    assert TaskPayload.from_json({"id": "t", "shell_tool": "bash"}) is None  # wrong type: not a payload


async def test_the_runs_temperature_and_top_p_override_every_call_and_are_recorded(tmp_path, tiny_model_dir):
    """`rollout --temperature T --top-p P` reaches the proxy's settings; each call is sampled and recorded with
    them, whatever the harness asked (Anthropic and Chat alike)."""
    from openforge.rollout import RolloutConfig
    from support.proxy import in_process_proxy

    config = RolloutConfig(tasks=[tmp_path], model=tiny_model_dir, run=tmp_path / "r", temperature=0.3, top_p=0.5)
    assert (config.temperature, config.top_p) == (0.3, 0.5)
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend="embedded", temperature=0.3, top_p=0.5) as p:
        episode_id, key = await p.new_episode(task="t")
        await p.openai(key).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=1.0, top_p=1.0
        )
        await p.anthropic(key).messages.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4, extra_body={"temperature": 0.9}
        )
        calls = p.store.list_calls(episode_id)
        assert len(calls) == 2
        assert all((c.sampling.temperature, c.sampling.top_p) == (0.3, 0.5) for c in calls)


def test_the_cli_proxy_serves_on_uvloop(tmp_path, monkeypatch):
    """`openforge proxy` runs its server on uvloop's event loop (a dependency; less CPU per call). Fails if
    `run_proxy` goes back to asyncio's own loop."""
    import asyncio

    import uvloop

    from openforge.proxy import server

    loops: list[asyncio.AbstractEventLoop] = []

    async def serve(config: ProxyConfig) -> None:
        loops.append(asyncio.get_running_loop())

    monkeypatch.setattr(server, "serve", serve)
    server.run_proxy(ProxyConfig(model=tmp_path, run=tmp_path / "run"))
    assert len(loops) == 1 and isinstance(loops[0], uvloop.Loop)
