"""Weight sync through a real proxy (uvicorn on loopback, embedded backend, the OpenAI SDK as clients):
after an update the next calls are served by the new policy version, their recorded logprobs are a forward
pass of the new checkpoint (not of the old one), and no call fails or goes missing while several clients keep
calling through pause → swap → resume."""

from __future__ import annotations

import asyncio
import random
import time

import httpx
import openai
import pytest
import torch

from openforge.models import ModelDir
from openforge.proxy.server import ProxyConfig, running_proxy
from openforge.train import (
    SFTConfig,
    SFTTrainer,
    WeightSyncError,
    apush_weights,
    push_weights,
    push_weights_in_process,
    save_checkpoint,
)
from openforge.train.weights_sync import WeightPusher
from support.train import make_sample

TEMPERATURE = 0.8  # not 1.0, so a forward pass that forgot the temperature would not match
CLIENTS = 4


@pytest.fixture()
def checkpoints(tmp_path, tiny_model):
    """Policy 0 (the base weights, saved as a checkpoint: the proxy serves that directory) and policy 1 (a few
    SFT steps later), both written by save_checkpoint."""
    torch.manual_seed(0)
    model = tiny_model.load_model()
    old = save_checkpoint(model, tiny_model, tmp_path / "ckpt" / "step-0", step=0)
    rng = random.Random(40)
    SFTTrainer(model, SFTConfig(lr=1e-2, steps=3, batch_size=4, warmup_steps=0, schedule="constant")).train(
        [make_sample(rng, "g", 1.0) for _ in range(4)]
    )
    new = save_checkpoint(model, tiny_model, tmp_path / "ckpt" / "step-3", step=3)
    return old, new


def forward_logprobs(model, call) -> torch.Tensor:
    """What a backend serving `model` records for this call: log_softmax(logits / T) at each output token."""
    ids = torch.tensor([call.prompt_ids + call.output_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]
    start = len(call.prompt_ids)
    rows = logits[start - 1 : start - 1 + len(call.output_ids)] / call.sampling.temperature
    return torch.log_softmax(rows, dim=-1).gather(-1, torch.tensor(call.output_ids)[:, None]).squeeze(-1)


def proxy_config(tmp_path, model, **settings) -> ProxyConfig:
    """The embedded backend serving `model` on loopback, with its admin API."""
    return ProxyConfig(model=model, run=tmp_path / "run", listen="127.0.0.1:0", admin_listen="127.0.0.1:0", **settings)


async def new_episode(admin: httpx.AsyncClient, n: int) -> tuple[str, str]:
    r = await admin.post("/admin/episodes", json={"task": f"t{n}", "harness": "sdk"})
    assert r.status_code == 201, r.text
    return r.json()["episode_id"], r.json()["key"]


async def test_weight_update_under_load(tmp_path, checkpoints):
    old_dir, new_dir = checkpoints
    async with running_proxy(proxy_config(tmp_path, old_dir, max_new_tokens=6, temperature=TEMPERATURE)) as proxy:
        admin = httpx.AsyncClient(base_url=proxy.admin_url, headers={"authorization": f"Bearer {proxy.admin_token}"})
        episodes = [await new_episode(admin, n) for n in range(CLIENTS)]
        swapped = asyncio.Event()
        stop = asyncio.Event()
        done: dict[str, list[tuple[float, float]]] = {eid: [] for eid, _ in episodes}  # (start, end) per call
        after_swap = {eid: 0 for eid, _ in episodes}

        async def client(episode_id: str, key: str, n: int) -> None:
            sdk = openai.AsyncOpenAI(api_key=key, base_url=f"{proxy.url}/v1", max_retries=0)
            i = 0
            while not stop.is_set():
                started = time.monotonic()
                # Any failure (non-200, dropped connection) raises here and fails the test.
                reply = await sdk.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": f"client {n} call {i}"}]
                )
                assert reply.choices[0].message is not None
                done[episode_id].append((started, time.monotonic()))
                after_swap[episode_id] += swapped.is_set()
                i += 1
            await sdk.close()

        tasks = [asyncio.create_task(client(eid, key, n)) for n, (eid, key) in enumerate(episodes)]
        while min(len(v) for v in done.values()) < 2:  # every client busy before the swap
            await asyncio.sleep(0.02)
        push_started = time.monotonic()
        version = await apush_weights(proxy.admin_url, proxy.admin_token, new_dir)
        push_ended = time.monotonic()
        swapped.set()
        while min(after_swap.values()) < 3:  # and after it
            await asyncio.sleep(0.02)
        stop.set()
        await asyncio.gather(*tasks)
        status = (await admin.get("/admin/status")).json()
        await admin.aclose()

        assert version == 1 and status["policy_version"] == 1 and status["paused"] is False
        old_model, new_model = ModelDir(old_dir).load_model(), ModelDir(new_dir).load_model()
        spans_swap = 0
        for episode_id, spans in done.items():
            calls = proxy.store.list_calls(episode_id)
            assert len(calls) == len(spans), "a call answered 200 is missing from the store (or one extra)"
            for call, (started, ended) in zip(calls, spans):
                assert call.call_error is None and call.output_ids and call.sampling.temperature == TEMPERATURE
                if started > push_ended:
                    assert call.policy_version == 1
                if ended < push_started:
                    assert call.policy_version == 0
                spans_swap += started < push_ended and ended > push_started
                recorded = torch.tensor(call.output_logprobs)
                served_by = new_model if call.policy_version == 1 else old_model
                other = old_model if call.policy_version == 1 else new_model
                assert (recorded - forward_logprobs(served_by, call)).abs().max() < 1e-4
                assert (recorded - forward_logprobs(other, call)).abs().max() > 1e-2
        assert spans_swap > 0, "no call was in flight during the swap; the test proved nothing about draining"


async def test_failed_load_resumes_and_reports(tmp_path, checkpoints):
    old_dir, new_dir = checkpoints
    async with running_proxy(proxy_config(tmp_path, old_dir, max_new_tokens=4)) as proxy:
        # The blocking client, as a synchronous trainer would use it (in a thread: the proxy runs on this loop).
        with pytest.raises(WeightSyncError, match="nowhere.*resumed on the old weights"):
            await asyncio.to_thread(push_weights, proxy.admin_url, proxy.admin_token, tmp_path / "nowhere")
        assert not proxy.service.gate.paused and proxy.service.backend.policy_version == 0
        with pytest.raises(WeightSyncError, match="pause failed: HTTP 401"):
            await apush_weights(proxy.admin_url, "wrong-token", new_dir)
        with pytest.raises(WeightSyncError, match="loading .*nowhere"):
            await push_weights_in_process(proxy, tmp_path / "nowhere")
        assert not proxy.service.gate.paused
        # an adapter goes to backends with a LoRA-loading API; the embedded engine takes merged weights
        with pytest.raises(WeightSyncError, match="HTTP 409: EmbeddedBackend cannot load a LoRA adapter.*merged"):
            await apush_weights(proxy.admin_url, proxy.admin_token, new_dir, adapter=True)
        with pytest.raises(WeightSyncError, match="cannot load a LoRA adapter"):
            await push_weights_in_process(proxy, new_dir, adapter=True)
        assert not proxy.service.gate.paused and proxy.service.backend.policy_version == 0

        assert await asyncio.to_thread(push_weights, proxy.admin_url, proxy.admin_token, new_dir) == 1
        assert await push_weights_in_process(proxy, old_dir) == 2
        async with httpx.AsyncClient(
            base_url=proxy.admin_url, headers={"authorization": f"Bearer {proxy.admin_token}"}
        ) as admin:
            episode_id, key = await new_episode(admin, 0)
        sdk = openai.AsyncOpenAI(api_key=key, base_url=f"{proxy.url}/v1", max_retries=0)
        await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "after"}])
        await sdk.close()
        (call,) = proxy.store.list_calls(episode_id)
        assert call.policy_version == 2


async def test_an_async_push_does_not_wait_for_calls_not_yet_started(tmp_path, checkpoints):
    """Asynchronous GRPO's push (`WeightPusher`, wait=False) on the embedded engine: the calls already generating
    finish under the old weights, the calls still queued behind them run under the new ones (no drain of the
    whole proxy, which would stall the later steps' episodes), each call's recorded logprobs are its own version's
    forward pass; `settle` waits for the swap and raises a failed push's error."""
    old_dir, new_dir = checkpoints
    config = proxy_config(
        tmp_path, old_dir, max_new_tokens=40, temperature=TEMPERATURE, backend_options={"max_batch": 2}
    )  # two calls generate, the others queue
    async with running_proxy(config) as proxy:
        backend = proxy.service.backend
        async with httpx.AsyncClient(
            base_url=proxy.admin_url, headers={"authorization": f"Bearer {proxy.admin_token}"}
        ) as admin:
            episodes = [await new_episode(admin, n) for n in range(5)]

        async def call(key: str, n: int) -> None:
            sdk = openai.AsyncOpenAI(api_key=key, base_url=f"{proxy.url}/v1", max_retries=0)
            await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": f"call {n}"}])
            await sdk.close()

        calls = [asyncio.create_task(call(key, n)) for n, (_, key) in enumerate(episodes)]
        deadline = time.monotonic() + 30
        while backend.active_jobs < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)  # the other three have reached the engine's queue
        pusher = WeightPusher(proxy, version=0)
        assert await pusher.push(new_dir, wait=False) == 1 == pusher.version
        await asyncio.gather(*calls)
        await pusher.settle()
        assert backend.policy_version == 1

        old_model, new_model = ModelDir(old_dir).load_model(), ModelDir(new_dir).load_model()
        versions = []
        for episode_id, _ in episodes:
            (recorded,) = proxy.store.list_calls(episode_id)
            versions.append(recorded.policy_version)
            served_by = new_model if recorded.policy_version == 1 else old_model
            assert (torch.tensor(recorded.output_logprobs) - forward_logprobs(served_by, recorded)).abs().max() < 1e-4
        # the two generating at the push on the old weights; calls asked before it but not started on the new ones
        # (draining the whole proxy served all five on the old weights)
        assert versions.count(0) >= 2 and 1 in versions, versions

        assert await pusher.push(tmp_path / "nowhere", wait=False) == 2
        with pytest.raises(WeightSyncError, match="nowhere"):
            await pusher.settle()
        assert backend.policy_version == 1 and not proxy.service.gate.paused
