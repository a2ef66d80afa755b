"""Parts 3-6 of benchmarks/proxy.py: streaming timing, load with abuse, faults, throughput against LiteLLM.

Part 3 — streaming: time to the first byte and to the first token of a streamed reply against the time to
the whole reply, per dialect, with the embedded backend (the tiny model sampling `--stream-tokens` tokens).

Part 4 — load: `--load-episodes` concurrent episodes shaped like Claude Code's (a ~12 KB system prompt, 16
tools with ~40 KB of schemas, each turn echoing the tool_use reply and adding a 2-6 KB tool result), growing
to `--load-context` tokens, then started afresh, for `--load-s` seconds against the scripted backend (a
policy that always calls bash, answered at once: what is measured is the proxy). Every completed call's
reply id is looked up in the store afterwards (lost: completed but not stored; duplicated: stored twice).
The proxy's RSS and open file descriptors are sampled every 2 s; RSS slope by least squares after the first
window. Abuse comes in alternating windows (`--abuse-window-s` each, off first): 50 slowloris connections, a
client posting 16 MB bodies back to back, and 1,000 idle connections opened to a forwarder (the sandbox
bridge) in front of the proxy's Unix socket; other episodes' p99 latency in the abuse windows is compared
with the quiet windows.

Part 5 — faults: harness-shaped clients (streaming tool loops; a call that breaks is retried with the same
body, as the SDKs retry) against a proxy killed with SIGKILL `--kills` times at random points and restarted on
the same run directory. Afterwards: every call a client saw complete (its `message_stop`) is in the store
once, and `PRAGMA integrity_check` is ok.

Part 6 — throughput: 64 concurrent streams against OpenForge and against LiteLLM's proxy, both in front of the
same canned server (`_canned_backend.py`: a fixed reply at once, so neither waits on a model), each proxy
pinned to one CPU and the clients and the server to the other.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
from _proxy_support import Children, free_port, loopback_env, wait_for

ROOT = Path(__file__).resolve().parents[1]

LOAD_POLICY = """def respond(conversation, call_index):
    command = "cat src/module_" + str(call_index) + ".py"
    return '<tool_call>\\n{"name": "Bash", "arguments": {"command": "' + command + '"}}\\n</tool_call>'
"""

# Paced: a reply written over ~0.4 s, so that kills land in the middle of streams.
FAULT_POLICY = """import time

def respond(conversation, call_index):
    for word in ("Let ", "me ", "look ", "at ", "the ", "module ", "first. "):
        time.sleep(0.05)
        yield word
    yield '\\n<tool_call>\\n{"name": "Bash", "arguments": {"command": "ls -la"}}\\n</tool_call>'
"""


def pct(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


# ---- a proxy process --------------------------------------------------------------------------------------


@dataclass
class Proxy:
    proc: object
    url: str
    admin_url: str
    admin_token: str
    pid: int


def start_proxy(
    children: Children,
    name: str,
    model: Path,
    backend: str,
    run: Path,
    *,
    listen="127.0.0.1:0",
    admin_listen="127.0.0.1:0",
    admin_token: str | None = None,
    uds: Path | None = None,
    extra: list[str] | None = None,
    cpus: set[int] | None = None,
) -> Proxy:
    run.mkdir(parents=True, exist_ok=True)
    info_path = run / "proxy.json"
    info_path.unlink(missing_ok=True)
    argv = [
        sys.executable,
        "-m",
        "openforge.cli",
        "proxy",
        "--model",
        str(model),
        "--backend",
        backend,
        "--run",
        str(run),
        "--listen",
        listen,
        "--admin-listen",
        admin_listen,
        *(extra or []),
    ]
    if admin_token:
        argv += ["--admin-token", admin_token]
    if uds:
        argv += ["--uds", str(uds)]
    proc = children.start(name, argv, env=loopback_env({"PYTHONPATH": str(ROOT)}), cwd=ROOT, cpus=cpus)
    wait_for(info_path.exists, 120, f"{name} start", proc, lambda: children.log_tail(name))
    info = wait_for(lambda: _json(info_path), 10, f"{name} proxy.json", proc)
    return Proxy(proc, info["url"], info["admin_url"], info["admin_token"], proc.pid)


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


async def new_episode(client: httpx.AsyncClient, proxy: Proxy) -> tuple[str, str]:
    r = await client.post(
        f"{proxy.admin_url}/admin/episodes",
        json={"task": "bench", "harness": "bench"},
        headers={"authorization": f"Bearer {proxy.admin_token}"},
    )
    r.raise_for_status()
    return r.json()["episode_id"], r.json()["key"]


async def end_episode(client: httpx.AsyncClient, proxy: Proxy, episode_id: str) -> None:
    await client.post(
        f"{proxy.admin_url}/admin/episodes/{episode_id}/end", headers={"authorization": f"Bearer {proxy.admin_token}"}
    )


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# ---- a streamed call, measured ------------------------------------------------------------------------------


@dataclass
class Streamed:
    status: int
    ttfb: float  # to the first byte of the body
    ttft: float  # to the first event carrying reply text
    total: float
    raw: bytes
    complete: bool  # the terminal event arrived


# A delta carrying reply text (not an empty opening one): Anthropic text/thinking deltas, Responses deltas, chat
# content / reasoning_content.
TEXT_DELTA = re.compile(rb'"(?:text|thinking|delta|content|reasoning_content)":"[^"]')
TEXT_EVENTS = (
    b'"text_delta"',
    b'"thinking_delta"',
    b'"response.output_text.delta"',
    b'"content":"',
    b'"reasoning_content":"',
)
TERMINAL = {"anthropic": b"event: message_stop", "responses": b"event: response.completed", "chat": b"data: [DONE]"}


async def streamed_call(client: httpx.AsyncClient, url: str, body: bytes, headers: dict, dialect: str) -> Streamed:
    t0 = time.perf_counter()
    ttfb = ttft = float("nan")
    raw = b""
    async with client.stream("POST", url, content=body, headers=headers) as r:
        async for chunk in r.aiter_raw():
            now = time.perf_counter() - t0
            if not raw:
                ttfb = now
            raw += chunk
            if ttft != ttft and TEXT_DELTA.search(chunk):
                ttft = now
    return Streamed(r.status_code, ttfb, ttft, time.perf_counter() - t0, raw, TERMINAL[dialect] in raw)


def sse_events(raw: bytes) -> list[dict]:
    out = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            try:
                out.append(json.loads(line[5:]))
            except ValueError:
                pass
    return out


def output_tokens(raw: bytes) -> int:
    """The reply's output tokens, from the usage its stream ends with (any dialect)."""
    n = 0
    for event in sse_events(raw):
        usage = event.get("usage") or (event.get("response") or {}).get("usage") or {}
        n = usage.get("output_tokens") or usage.get("completion_tokens") or n
    return n


def anthropic_reply(raw: bytes) -> tuple[str | None, list[dict], int | None]:
    """(reply id, content blocks as a client echoes them, input tokens) of a streamed Messages reply."""
    reply_id, blocks, partial, tokens = None, [], {}, None
    for event in sse_events(raw):
        kind = event.get("type")
        if kind == "message_start":
            reply_id = event["message"]["id"]
            tokens = event["message"]["usage"]["input_tokens"]
        elif kind == "content_block_start":
            block = dict(event["content_block"])
            if block["type"] == "tool_use":
                partial[event["index"]] = ""
            blocks.append(block)
        elif kind == "content_block_delta":
            delta, block = event["delta"], blocks[event["index"]]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "input_json_delta":
                partial[event["index"]] += delta["partial_json"]
        elif kind == "content_block_stop" and event["index"] in partial:
            blocks[event["index"]]["input"] = json.loads(partial.pop(event["index"]) or "{}")
    return reply_id, blocks, tokens


# ---- part 3: streaming timing ---------------------------------------------------------------------------------


def stream_bodies(message: str, max_tokens: int) -> dict[str, tuple[str, dict]]:
    tool = {
        "name": "bash",
        "description": "Run a command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
    return {
        "anthropic": (
            "/v1/messages",
            {
                "model": "tiny",
                "max_tokens": max_tokens,
                "stream": True,
                "tools": [tool],
                "messages": [{"role": "user", "content": message}],
            },
        ),
        "responses": (
            "/v1/responses",
            {
                "model": "tiny",
                "max_output_tokens": max_tokens,
                "stream": True,
                "tools": [{"type": "function", "name": "bash", "parameters": tool["input_schema"]}],
                "input": message,
            },
        ),
        "chat": (
            "/v1/chat/completions",
            {
                "model": "tiny",
                "max_tokens": max_tokens,
                "stream": True,
                "stream_options": {"include_usage": True},
                "tools": [{"type": "function", "function": {"name": "bash", "parameters": tool["input_schema"]}}],
                "messages": [{"role": "user", "content": message}],
            },
        ),
    }


async def stream_timing(args, children: Children, model: Path, work: Path, filler: str) -> dict:
    proxy = start_proxy(
        children,
        "proxy-stream",
        model,
        "embedded",
        work / "run-stream",
        extra=["--temperature", "1.0", "--max-new-tokens", str(args.stream_tokens)],
    )
    results: dict = {}
    message = "Read this and answer.\n\n" + filler[: args.stream_prompt_chars]
    async with httpx.AsyncClient(trust_env=False, timeout=600) as client:
        for dialect, (path, body) in stream_bodies(message, args.stream_tokens).items():
            rows = []
            for i in range(args.stream_calls + 1):
                _, key = await new_episode(client, proxy)  # a fresh episode: every call reads its whole prompt
                s = await streamed_call(
                    client,
                    proxy.url + path,
                    json.dumps(body).encode(),
                    {"authorization": f"Bearer {key}", "anthropic-version": "2023-06-01"},
                    dialect,
                )
                if i and s.status == 200 and s.complete:  # the first is a warm-up
                    rows.append((s, output_tokens(s.raw)))
            calls = [r for r, _ in rows]
            results[dialect] = {
                "calls": len(calls),
                "output_tokens_mean": float(np.mean([n for _, n in rows])) if rows else None,
                "ttfb_p50_s": pct([r.ttfb for r in calls], 50),
                "ttft_p50_s": pct([r.ttft for r in calls], 50),
                "total_p50_s": pct([r.total for r in calls], 50),
                "ttfb_p90_s": pct([r.ttfb for r in calls], 90),
                "ttft_p90_s": pct([r.ttft for r in calls], 90),
                "total_p90_s": pct([r.total for r in calls], 90),
                "ttft_over_total_p50": pct([r.ttft / r.total for r in calls], 50),
            }
    children.stop(proxy.proc, signal.SIGINT)
    return {
        "backend": "embedded (tiny model, CPU)",
        "max_tokens": args.stream_tokens,
        "prompt_chars": len(message),
        "dialects": results,
    }


# ---- part 4: load, with abuse -------------------------------------------------------------------------------


def claude_code_shape(filler: str, seed: int) -> tuple[str, list[dict]]:
    """A Claude Code-like system prompt (~12 KB) and 16 tools (~40 KB of schemas)."""
    rng = random.Random(seed)
    system = "You are an interactive CLI tool that helps users with software engineering tasks.\n\n" + filler[:12_000]
    tools = []
    for n in range(16):
        props = {
            f"param_{k}": {
                "type": rng.choice(["string", "integer", "boolean"]),
                "description": filler[rng.randrange(0, 50_000) :][: rng.randint(120, 400)],
            }
            for k in range(rng.randint(3, 8))
        }
        tools.append(
            {
                "name": "Bash" if n == 0 else f"Tool{n}",
                "description": filler[n * 997 :][:1200],
                "input_schema": {
                    "type": "object",
                    "properties": {"command": {"type": "string"}, **props},
                    "required": ["command"],
                },
            }
        )
    return system, tools


@dataclass
class LoadCall:
    started: float
    latency: float
    ok: bool
    reply_id: str | None
    episode_id: str
    tokens: int | None


@dataclass
class LoadState:
    calls: list[LoadCall] = field(default_factory=list)
    episodes: int = 0
    errors: dict = field(default_factory=dict)
    stop: bool = False


async def load_episode_loop(
    client, proxy: Proxy, system: str, tools: list[dict], filler: str, rng: random.Random, args, state: LoadState
) -> None:
    prefix = json.dumps({"model": "tiny", "max_tokens": 1024, "stream": True, "system": system, "tools": tools})[:-1]
    while not state.stop:
        episode_id, key = await new_episode(client, proxy)
        state.episodes += 1
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        messages = [
            json.dumps(
                {"role": "user", "content": "Fix the failing test in src/. " + filler[rng.randrange(40_000) :][:1500]}
            )
        ]
        while not state.stop:
            body = (prefix + ', "messages": [' + ",".join(messages) + "]}").encode()
            t0 = time.perf_counter()
            try:
                s = await streamed_call(client, proxy.url + "/v1/messages", body, headers, "anthropic")
                ok = s.status == 200 and s.complete
            except httpx.HTTPError as e:
                s, ok = None, False
                state.errors[type(e).__name__] = state.errors.get(type(e).__name__, 0) + 1
            if not ok:
                state.calls.append(LoadCall(t0, time.perf_counter() - t0, False, None, episode_id, None))
                await asyncio.sleep(0.5)
                continue
            reply_id, blocks, tokens = anthropic_reply(s.raw)
            state.calls.append(LoadCall(t0, s.total, True, reply_id, episode_id, tokens))
            use = next((b for b in blocks if b.get("type") == "tool_use"), None)
            if use is None or tokens >= args.load_context:
                break
            result = filler[rng.randrange(60_000) :][: rng.randint(2000, 6000)]
            messages.append(json.dumps({"role": "assistant", "content": blocks}))
            messages.append(
                json.dumps(
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": result}]}
                )
            )
        await end_episode(client, proxy, episode_id)


async def slowloris(host: str, port: int, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n")
            while not stop.is_set() and not reader.at_eof():
                writer.write(b"x")
                await writer.drain()
                try:
                    await asyncio.wait_for(reader.read(4096), 1.0)
                except TimeoutError:
                    continue
            writer.close()
        except OSError:
            await asyncio.sleep(0.5)


async def big_bodies(client, proxy: Proxy, key: str, stop: asyncio.Event, counts: dict) -> None:
    body = json.dumps(
        {"model": "tiny", "max_tokens": 16, "messages": [{"role": "user", "content": "x" * (16 * 1024 * 1024 - 200)}]}
    ).encode()
    while not stop.is_set():
        try:
            r = await client.post(proxy.url + "/v1/messages", content=body, headers={"x-api-key": key})
            counts[r.status_code] = counts.get(r.status_code, 0) + 1
        except httpx.HTTPError:
            await asyncio.sleep(0.2)


async def idle_through_forwarder(port: int, n: int, stop: asyncio.Event, counts: dict) -> None:
    conns = []
    for _ in range(n):
        try:
            conns.append(await asyncio.open_connection("127.0.0.1", port))
        except OSError:
            counts["refused"] = counts.get("refused", 0) + 1
    await asyncio.sleep(1)
    counts["closed_by_forwarder"] = sum(1 for r, _ in conns if r.at_eof())
    counts["held"] = len(conns) - counts["closed_by_forwarder"]
    await stop.wait()
    for _, w in conns:
        w.close()


async def load(args, children: Children, model: Path, work: Path, filler: str) -> dict:
    policy = work / "load_policy.py"
    policy.write_text(LOAD_POLICY)
    sock = work / "proxy.sock"
    proxy = start_proxy(children, "proxy-load", model, f"scripted:{policy}", work / "run-load", uds=sock)
    fwd_port = free_port()
    forwarder = children.start(
        "forwarder",
        [
            sys.executable,
            "-I",
            str(ROOT / "openforge/sandbox/forwarder.py"),
            "--listen",
            f"127.0.0.1:{fwd_port}",
            "--uds",
            str(sock),
        ],
        env=loopback_env(),
        cwd=ROOT,
    )
    state = LoadState()
    samples: list[tuple[float, float, int]] = []
    windows: list[tuple[float, float, bool]] = []
    abuse_counts: dict = {"bodies": {}, "idle": {}}
    limits = httpx.Limits(
        max_connections=args.load_episodes * 2, max_keepalive_connections=args.load_episodes * 2, keepalive_expiry=30
    )
    host, _, port = proxy.url.removeprefix("http://").rpartition(":")
    async with httpx.AsyncClient(trust_env=False, timeout=300, limits=limits) as client:
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(
                load_episode_loop(client, proxy, *claude_code_shape(filler, i), filler, random.Random(i), args, state)
            )
            for i in range(args.load_episodes)
        ]

        async def sample():
            while not state.stop:
                samples.append((time.perf_counter() - started, rss_mb(proxy.pid), open_fds(proxy.pid)))
                await asyncio.sleep(2)

        sampler = asyncio.create_task(sample())
        _, abuse_key = await new_episode(client, proxy)
        abuse = False
        while time.perf_counter() - started < args.load_s:
            w0 = time.perf_counter() - started
            stop = asyncio.Event()
            abusers = []
            if abuse:
                abusers = [asyncio.create_task(slowloris(host, int(port), stop)) for _ in range(50)]
                abusers.append(asyncio.create_task(big_bodies(client, proxy, abuse_key, stop, abuse_counts["bodies"])))
                abusers.append(asyncio.create_task(idle_through_forwarder(fwd_port, 1000, stop, abuse_counts["idle"])))
            await asyncio.sleep(min(args.abuse_window_s, args.load_s - w0))
            stop.set()
            await asyncio.gather(*abusers, return_exceptions=True)
            windows.append((w0, time.perf_counter() - started, abuse))
            abuse = not abuse
        state.stop = True
        await asyncio.gather(*tasks, return_exceptions=True)
        sampler.cancel()
    children.stop(forwarder)
    children.stop(proxy.proc, signal.SIGINT, timeout=60)
    return summarise_load(args, state, samples, windows, abuse_counts, work / "run-load", started)


def summarise_load(args, state: LoadState, samples, windows, abuse_counts, run: Path, started: float) -> dict:
    sys.path.insert(0, str(ROOT))
    from openforge.store import TrajectoryStore

    ok = [c for c in state.calls if c.ok]
    warm = args.abuse_window_s  # the first (quiet) window warms the proxy up
    with TrajectoryStore.open(run) as store:
        integrity = store.integrity_check()
        stored: dict[str, int] = {}
        for episode_id in {c.episode_id for c in ok}:
            for call in store.list_calls(episode_id):
                reply_id = _reply_id(call.response_body)
                stored[reply_id] = stored.get(reply_id, 0) + 1
    lost = [c.reply_id for c in ok if c.reply_id not in stored]
    duplicated = [r for r, n in stored.items() if n > 1]

    def window_latencies(abused: bool) -> list[float]:
        spans = [(a, b) for a, b, on in windows if on == abused and a >= warm]
        return [c.latency for c in ok if any(a <= c.started - started < b for a, b in spans)]

    quiet, abused = window_latencies(False), window_latencies(True)

    def slope(after: float) -> float:
        """RSS growth in MB per minute, least squares over the samples after `after` seconds."""
        times = np.array([t for t, _, _ in samples if t >= after])
        rss = np.array([r for t, r, _ in samples if t >= after])
        return float(np.polyfit(times / 60, rss, 1)[0]) if len(times) > 2 else float("nan")

    return {
        "episodes_concurrent": args.load_episodes,
        "duration_s": args.load_s,
        "context_tokens": args.load_context,
        "episodes_run": state.episodes,
        "calls_completed": len(ok),
        "calls_failed": len(state.calls) - len(ok),
        "client_errors": state.errors,
        "calls_per_s": len(ok) / args.load_s,
        "largest_prompt_tokens": max((c.tokens or 0) for c in ok) if ok else 0,
        "lost_calls": len(lost),
        "duplicated_calls": len(duplicated),
        "integrity_check": integrity,
        "latency_p50_s": pct([c.latency for c in ok if c.started - started >= warm], 50),
        "latency_p99_s": pct([c.latency for c in ok if c.started - started >= warm], 99),
        "quiet_windows_p50_s": pct(quiet, 50),
        "quiet_windows_p99_s": pct(quiet, 99),
        "abuse_windows_p50_s": pct(abused, 50),
        "abuse_windows_p99_s": pct(abused, 99),
        "abuse_p99_ratio": pct(abused, 99) / pct(quiet, 99) if quiet and abused else float("nan"),
        "abuse": {
            "slowloris_connections": 50,
            "body_mb": 16,
            "big_body_answers": abuse_counts["bodies"],
            "idle_connections_to_forwarder": 1000,
            "forwarder": abuse_counts["idle"],
        },
        "rss_mb_first": samples[0][1] if samples else None,
        "rss_mb_last": samples[-1][1] if samples else None,
        "rss_mb_max": max(r for _, r, _ in samples) if samples else None,
        # the store keeps bounded caches of recent prompts and bodies (up to ~300 MB): they fill, then stop
        "rss_slope_mb_per_min": slope(warm),
        "rss_slope_second_half_mb_per_min": slope(args.load_s / 2),
        "open_fds_max": max(f for _, _, f in samples) if samples else None,
        "open_fds_last": samples[-1][2] if samples else None,
    }


def _reply_id(body: bytes) -> str:
    for event in sse_events(body):
        if event.get("type") == "message_start":
            return event["message"]["id"]
    try:
        return json.loads(body).get("id", "")
    except ValueError:
        return ""
