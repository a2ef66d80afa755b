"""Parts 5 and 6 of benchmarks/proxy.py (see `_proxy_scale.py` for what each measures): SIGKILLs in the middle
of streaming tool loops, and throughput at 64 concurrent streams against LiteLLM."""

from __future__ import annotations

import asyncio
import json
import os
import random
import secrets
import signal
import statistics
import sys
import time
from pathlib import Path

import httpx
from _proxy_scale import FAULT_POLICY, TERMINAL, TEXT_EVENTS, Proxy, anthropic_reply, new_episode, start_proxy
from _proxy_support import Children, free_port, loopback_env, wait_for
from _raw_http import RawConnection

ROOT = Path(__file__).resolve().parents[1]
BASH = {
    "name": "Bash",
    "description": "Run a command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
}


async def tolerant_stream(client: httpx.AsyncClient, url: str, body: bytes, headers: dict) -> tuple[bytes, bool, int]:
    """(bytes received, terminal event seen, status); a broken connection returns what had arrived."""
    raw, status = b"", 0
    try:
        async with client.stream("POST", url, content=body, headers=headers) as r:
            status = r.status_code
            async for chunk in r.aiter_raw():
                raw += chunk
    except httpx.HTTPError:
        pass
    return raw, TERMINAL["anthropic"] in raw, status


# ---- part 5: faults ---------------------------------------------------------------------------------------------


async def faults(args, children: Children, model: Path, work: Path, filler: str) -> dict:
    policy = work / "fault_policy.py"
    policy.write_text(FAULT_POLICY)
    run = work / "run-faults"
    port, admin_port, token = free_port(), free_port(), secrets.token_urlsafe(16)

    def launch() -> Proxy:
        return start_proxy(
            children,
            "proxy-faults",
            model,
            f"scripted:{policy}",
            run,
            listen=f"127.0.0.1:{port}",
            admin_listen=f"127.0.0.1:{admin_port}",
            admin_token=token,
        )

    proxy = launch()
    url = f"http://127.0.0.1:{port}/v1/messages"
    seen: list[tuple[str, str]] = []  # (episode id, reply id) of every call a client saw complete
    counts = {"broken_mid_stream": 0, "broken_before_first_event": 0, "retries": 0}
    stop = asyncio.Event()
    up = asyncio.Event()
    up.set()

    async def harness(i: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(i)
        while not stop.is_set():
            await up.wait()
            try:
                episode_id, key = await new_episode(client, proxy)
            except httpx.HTTPError:
                await asyncio.sleep(0.2)
                continue
            headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
            messages = [
                {"role": "user", "content": "Look around the repository. " + filler[rng.randrange(10_000) :][:800]}
            ]
            for _ in range(args.fault_calls_per_episode):
                body = json.dumps(
                    {"model": "tiny", "max_tokens": 256, "stream": True, "tools": [BASH], "messages": messages}
                ).encode()
                while True:  # as a harness's SDK does: the same request again until it completes
                    await up.wait()
                    raw, complete, status = await tolerant_stream(client, url, body, headers)
                    if complete:
                        break
                    counts["retries"] += 1
                    if any(marker in raw for marker in TEXT_EVENTS):
                        counts["broken_mid_stream"] += 1
                    else:
                        counts["broken_before_first_event"] += 1
                    await asyncio.sleep(0.1)
                reply_id, blocks, _ = anthropic_reply(raw)
                seen.append((episode_id, reply_id))
                use = next(b for b in blocks if b.get("type") == "tool_use")
                messages += [
                    {"role": "assistant", "content": blocks},
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": use["id"],
                                "content": filler[rng.randrange(10_000) :][:600],
                            }
                        ],
                    },
                ]
                if stop.is_set():
                    return

    rng = random.Random(7)
    kills = []
    async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
        tasks = [asyncio.create_task(harness(i, client)) for i in range(args.fault_clients)]
        await asyncio.sleep(2)
        for _ in range(args.kills):
            await asyncio.sleep(rng.uniform(0.2, 1.5))
            in_flight = len(seen)
            os.kill(proxy.pid, signal.SIGKILL)
            proxy.proc.wait(30)
            up.clear()
            kills.append({"after_completed_calls": in_flight})
            proxy = await asyncio.to_thread(launch)
            up.set()
        await asyncio.sleep(3)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 120)
    children.stop(proxy.proc, signal.SIGINT, timeout=60)

    sys.path.insert(0, str(ROOT))
    from openforge.store import TrajectoryStore

    with TrajectoryStore.open(run) as store:
        integrity = store.integrity_check()
        rows: dict[str, int] = {}
        total_rows = 0
        for episode_id in {e for e, _ in seen}:
            for call in store.list_calls(episode_id):
                total_rows += 1
                reply_id, _, _ = anthropic_reply(call.response_body)
                rows[reply_id] = rows.get(reply_id, 0) + 1
    missing = [r for _, r in seen if rows.get(r, 0) == 0]
    duplicated = [r for r, n in rows.items() if n > 1]
    return {
        "kills": len(kills),
        "clients": args.fault_clients,
        "calls_seen_complete": len(seen),
        "calls_in_store": total_rows,
        "seen_complete_missing_from_store": len(missing),
        "duplicated_in_store": len(duplicated),
        "integrity_check": integrity,
        **counts,
        "stored_but_never_seen_complete": total_rows - len(seen) + len(missing),
    }


# ---- part 6: throughput against LiteLLM ------------------------------------------------------------------------


async def _hammer(url: str, headers: dict, new_key, concurrency: int, seconds: float) -> dict:
    """`concurrency` streams of 10-call conversations for `seconds`, each over its own keep-alive connection of
    the lean client (`_raw_http.py`: httpx's own CPU per call would cap the figure); completed calls per second."""
    done = 0
    failed = 0
    deadline = time.perf_counter() + seconds

    async def stream(n: int) -> None:
        nonlocal done, failed
        conn = RawConnection(url)
        try:
            while time.perf_counter() < deadline:
                key = await new_key() if new_key else None
                messages = [{"role": "user", "content": f"Stream {n}: list the files."}]
                for _ in range(10):
                    if time.perf_counter() >= deadline:
                        return
                    h = dict(headers)
                    if key:
                        h["x-api-key"] = key
                    body = json.dumps(
                        {"model": "tiny", "max_tokens": 64, "stream": True, "tools": [BASH], "messages": messages}
                    ).encode()
                    status, raw = await conn.post(body, h)
                    if status != 200 or TERMINAL["anthropic"] not in raw:
                        failed += 1
                        break
                    done += 1
                    _, blocks, _ = anthropic_reply(raw)
                    use = next((b for b in blocks if b.get("type") == "tool_use"), None)
                    blocks = blocks or [{"type": "text", "text": ""}]
                    follow = (
                        [{"type": "tool_result", "tool_use_id": use["id"], "content": "a.txt b.txt"}]
                        if use
                        else [{"type": "text", "text": "go on"}]
                    )
                    messages += [{"role": "assistant", "content": blocks}, {"role": "user", "content": follow}]
        finally:
            await conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(stream(n) for n in range(concurrency)))
    wall = time.perf_counter() - t0
    return {"calls": done, "failed": failed, "wall_s": wall, "calls_per_s": done / wall}


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process `pid` and its descendants, from /proc."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


async def _measured(pid: int, hammer) -> dict:
    """`hammer`'s figures plus the CPU the proxy (process `pid` and its children) and this client spent: the
    proxy's CPU per call, and the client's share of its core (near 1.0 would mean the client set the pace)."""
    proxy0, client0 = tree_cpu_s(pid), sum(os.times()[:2])
    result = await hammer
    proxy_cpu, client_cpu = tree_cpu_s(pid) - proxy0, sum(os.times()[:2]) - client0
    result["proxy_cpu_s"] = round(proxy_cpu, 2)
    result["proxy_cpu_ms_per_call"] = round(1000 * proxy_cpu / max(1, result["calls"]), 3)
    result["proxy_core_share"] = round(proxy_cpu / result["wall_s"], 3)
    result["client_core_share"] = round(client_cpu / result["wall_s"], 3)
    return result


def _summary(rounds: list[dict]) -> dict:
    """One target's rounds: the median calls/s (what the ratio compares) and the CPU per call over all rounds."""
    calls, cpu = sum(r["calls"] for r in rounds), sum(r["proxy_cpu_s"] for r in rounds)
    return {
        "calls_per_s": statistics.median(r["calls_per_s"] for r in rounds),
        "calls": calls,
        "failed": sum(r["failed"] for r in rounds),
        "proxy_cpu_ms_per_call": round(1000 * cpu / max(1, calls), 3),
        "rounds": rounds,
    }


async def throughput(args, children: Children, model: Path, work: Path, start_litellm) -> dict:
    cpus = sorted(os.sched_getaffinity(0))
    proxy_cpus = {cpus[0]}
    rest = set(cpus[1:]) or None
    port = free_port()
    canned = children.start(
        "canned",
        [sys.executable, str(ROOT / "benchmarks/_canned_backend.py"), str(model), str(port)],
        env=loopback_env({"PYTHONPATH": str(ROOT)}),
        cwd=ROOT,
        cpus=rest,
    )

    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, 60, "canned backend", canned, lambda: children.log_tail("canned"))
    mine = os.sched_getaffinity(0)
    results: dict = {
        "concurrency": args.throughput_concurrency,
        "seconds": args.throughput_s,
        "rounds": args.throughput_rounds,
        "pinning": f"each proxy on CPU {min(proxy_cpus)}; clients and the canned server on the rest",
    }
    headers = {"anthropic-version": "2023-06-01"}

    async def openforge(r: int) -> dict:
        proxy = start_proxy(
            children,
            f"proxy-throughput-{r}",
            model,
            f"vllm:http://127.0.0.1:{port}",
            work / f"run-tp-{r}",
            cpus=proxy_cpus,
        )
        try:
            async with httpx.AsyncClient(trust_env=False, timeout=30) as admin:

                async def key():
                    return (await new_episode(admin, proxy))[1]

                await _hammer(proxy.url + "/v1/messages", headers, key, 4, 3)  # warm-up
                return await _measured(
                    proxy.proc.pid,
                    _hammer(proxy.url + "/v1/messages", headers, key, args.throughput_concurrency, args.throughput_s),
                )
        finally:
            children.stop(proxy.proc, signal.SIGINT, timeout=60)

    async def litellm(r: int) -> dict:
        lproc, lport, lkey = start_litellm(children, args, work, model.name, port, cpus=proxy_cpus)
        try:
            lurl = f"http://127.0.0.1:{lport}/v1/messages"
            lheaders = {**headers, "x-api-key": lkey}
            await _hammer(lurl, lheaders, None, 4, 3)  # warm-up
            return await _measured(
                lproc.pid, _hammer(lurl, lheaders, None, args.throughput_concurrency, args.throughput_s)
            )
        finally:
            children.stop(lproc)

    targets = {"openforge": openforge} | ({} if args.skip_litellm else {"litellm": litellm})
    runs: dict[str, list[dict]] = {name: [] for name in targets}
    try:
        if rest:
            os.sched_setaffinity(0, rest)
        for r in range(args.throughput_rounds):
            names = list(targets) if r % 2 == 0 else list(targets)[::-1]  # alternated: no position bias
            for name in names:
                try:
                    runs[name].append(await targets[name](r))
                except (RuntimeError, OSError) as e:
                    if name == "openforge":
                        raise
                    results[name] = {"unavailable": str(e)[:300]}
                    targets.pop(name)
    finally:
        os.sched_setaffinity(0, mine)
        children.stop(canned)
    for name, measured in runs.items():
        if measured:
            results[name] = _summary(measured)
    of, lt = results.get("openforge", {}), results.get("litellm", {})
    if of.get("calls_per_s") and lt.get("calls_per_s"):
        results["ratio_openforge_over_litellm"] = of["calls_per_s"] / lt["calls_per_s"]
    return results
