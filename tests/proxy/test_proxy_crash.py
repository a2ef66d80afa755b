"""SIGKILL of the proxy in the middle of a tool loop: every call the client saw complete is in the store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx

from openforge.store import TrajectoryStore
from support.paths import POLICIES

POLICY = POLICIES / "slow_tool_loop.py"
BASH = {
    "name": "bash",
    "description": "Run.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def start_proxy(run: Path, model_dir: Path, backend: str) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openforge.cli",
            "proxy",
            "--model",
            str(model_dir),
            "--backend",
            backend,
            "--run",
            str(run),
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    info_path = run / "proxy.json"
    deadline = time.monotonic() + 60
    while not info_path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"proxy did not start: {proc.stdout.read().decode()}")
        time.sleep(0.05)
    time.sleep(0.05)
    return proc, json.loads(info_path.read_text())


def test_sigkill_mid_tool_loop_loses_no_completed_call(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    proc, info = start_proxy(run, tiny_model_dir, f"scripted:{POLICY}")
    try:
        admin = httpx.Client(base_url=info["admin_url"], headers={"authorization": f"Bearer {info['admin_token']}"})
        episode = admin.post("/admin/episodes", json={"task": "crash", "harness": "sdk"}).json()
        client = anthropic.Anthropic(api_key=episode["key"], base_url=info["url"], max_retries=0, timeout=60)
        messages = [{"role": "user", "content": "loop"}]
        seen_ids = []
        for i in range(3):
            with client.messages.stream(model="m", max_tokens=100, tools=[BASH], messages=messages) as s:
                reply = s.get_final_message()
            seen_ids.append(reply.id)
            call = next(b for b in reply.content if b.type == "tool_use")
            messages += [
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": str(i)}]},
            ]
        # the fourth call is in flight (the policy sleeps) when the proxy is killed
        import threading

        def fourth():
            try:
                client.messages.create(model="m", max_tokens=100, tools=[BASH], messages=messages)
            except anthropic.APIError:
                pass

        t = threading.Thread(target=fourth, daemon=True)
        t.start()
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        t.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    with TrajectoryStore.open(run) as store:
        assert store.integrity_check() == "ok"
        calls = store.list_calls(episode["episode_id"])
        bodies = b"".join(c.response_body for c in calls)
        for reply_id in seen_ids:
            assert reply_id.encode() in bodies, f"completed call {reply_id} missing after SIGKILL"
        assert [c.index for c in calls] == [0, 1, 2]
        assert all(c.output_ids for c in calls)


def test_sigkill_mid_stream_leaves_no_call_the_client_did_not_see_complete(tmp_path, tiny_model_dir):
    """The durability rule for streams (docs/design.md, invariant 2): a call is committed before its terminal
    event. Killed while a reply is streaming — its first piece already at the client — the proxy leaves no row
    for that call (the client never saw it complete and retries it); every call the client saw complete is
    there once; after a restart the retry is served and recorded once."""
    run = tmp_path / "run"
    policy = POLICIES / "gated_stream.py"
    proc, info = start_proxy(run, tiny_model_dir, f"scripted:{policy}")
    open_gate, held_gate = tmp_path / "open", tmp_path / "held"
    open_gate.write_text("open")
    try:
        admin = httpx.Client(base_url=info["admin_url"], headers={"authorization": f"Bearer {info['admin_token']}"})
        episode = admin.post("/admin/episodes", json={"task": "crash", "harness": "sdk"}).json()
        client = anthropic.Anthropic(api_key=episode["key"], base_url=info["url"], max_retries=0, timeout=60)
        with client.messages.stream(
            model="m", max_tokens=100, tools=[BASH], messages=[{"role": "user", "content": f"GATE={open_gate}"}]
        ) as s:
            completed = s.get_final_message()
        held = [{"role": "user", "content": f"GATE={held_gate}"}]
        text = ""
        with client.messages.stream(model="m", max_tokens=100, tools=[BASH], messages=held) as s:
            for event in s:
                if event.type == "content_block_delta":
                    text += event.delta.text
                if "FIRST-PIECE" in text:
                    os.kill(proc.pid, signal.SIGKILL)  # mid-stream: the reply's first piece is here, its end is not
                    proc.wait(10)
                    break
    finally:
        if proc.poll() is None:
            proc.kill()
        held_gate.write_text("open")
    with TrajectoryStore.open(run) as store:
        assert store.integrity_check() == "ok"
        calls = store.list_calls(episode["episode_id"])
        assert [c.index for c in calls] == [0]  # the completed call, once; nothing of the killed one
        assert completed.id.encode() in calls[0].response_body

    (run / "proxy.json").unlink()  # the killed proxy's
    proc, info = start_proxy(run, tiny_model_dir, f"scripted:{policy}")  # restarted on the same run
    try:
        client = anthropic.Anthropic(api_key=episode["key"], base_url=info["url"], max_retries=0, timeout=60)
        with client.messages.stream(model="m", max_tokens=100, tools=[BASH], messages=held) as s:
            retried = s.get_final_message()
    finally:
        proc.kill()
        proc.wait(10)
    with TrajectoryStore.open(run) as store:
        assert store.integrity_check() == "ok"
        calls = store.list_calls(episode["episode_id"])
        assert [c.index for c in calls] == [0, 1] and retried.id.encode() in calls[1].response_body
        assert calls[1].break_reason == "state_lost"
