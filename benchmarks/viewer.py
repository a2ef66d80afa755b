"""How fast `openforge view` serves a big run: a store of 100k synthetic episodes (3 calls each, Chat Completions
bodies, prompts that continue each other as the proxy records them), served by the real `openforge view`
process, pages fetched over HTTP.

    python benchmarks/viewer.py                      # 100k episodes; writes benchmarks/results/viewer.json
    python benchmarks/viewer.py --episodes 10000 --keep /tmp/viewer-bench

Targets (issue #15, 2 cores): the episodes page under 2 s, one episode page under 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from openforge.core import CallRecord, Episode, EpisodeState, Outcome  # noqa: E402
from openforge.models import build_tiny_model  # noqa: E402
from openforge.store import TrajectoryStore  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
    }
]
TARGETS_S = {"episodes": 2.0, "episode": 0.5}


def _body(messages: list[dict]) -> bytes:
    return json.dumps({"model": "tiny", "messages": messages, "tools": TOOLS}).encode()


def _episode_calls(rng: random.Random, episode: Episode, calls: int, step: int) -> list[CallRecord]:
    messages = [
        {"role": "system", "content": "You are a shell agent."},
        {"role": "user", "content": f"Task {episode.task}: make the tests pass."},
    ]
    prompt = [rng.randrange(300, 1000) for _ in range(120)]
    out = []
    t = episode.created_at
    reused = 0  # the previous call's prompt + output: what this prompt starts with (the proxy's hint to the store)
    for index in range(calls):
        output = [rng.randrange(300, 1000) for _ in range(rng.randrange(10, 60))]
        out.append(
            CallRecord(
                episode_id=episode.id,
                index=index,
                prompt_ids=list(prompt),
                output_ids=output,
                output_logprobs=[-rng.random() * 2 for _ in output],
                policy_version=step,
                started_at=t + index,
                finished_at=t + index + 0.5,
                timings={"total_s": 0.5},
                request_body=_body(messages),
                metadata={"extends_call": index - 1, "reused_prompt_tokens": reused} if index else {},
            )
        )
        call_id = f"call_{index}"
        messages = messages + [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": f"echo step {index}"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": f"step {index}\n" * rng.randrange(1, 20)},
        ]
        reused = len(prompt) + len(output)
        prompt = prompt + output + [rng.randrange(300, 1000) for _ in range(rng.randrange(20, 80))]
    return out


def build(run: Path, model: Path, episodes: int, calls: int, seed: int = 0) -> float:
    """The synthetic run; returns the seconds it took."""
    started = time.perf_counter()
    rng = random.Random(seed)
    with TrajectoryStore.open(run) as store:
        store.set_run_info({"model": str(model)})
        batch: list[CallRecord] = []
        for i in range(episodes):
            step = i // 512
            failed_infra = rng.random() < 0.02
            passed = rng.random() < 0.4
            outcome = Outcome.sandbox_error if failed_infra else Outcome.passed if passed else Outcome.failed
            episode = Episode(
                id=uuid.UUID(int=rng.getrandbits(128)).hex,
                key=uuid.uuid4().hex,
                task=f"task-{rng.randrange(1000):04d}",
                harness=rng.choice(("react", "claude-code")),
                sample=i % 4,
                state=EpisodeState.ended,
                outcome=outcome,
                outcome_reason="the container died" if failed_infra else None,
                reward=None if failed_infra else float(passed),
                created_at=1_700_000_000 + i,
                ended_at=1_700_000_000 + i + 30,
                metadata={"step": step, "final": True, "task": {"id": "t", "instruction": "make the tests pass"}},
            )
            store.create_episode(episode)
            batch += _episode_calls(rng, episode, calls, step)
            if len(batch) >= 3000:
                store.add_calls(batch)
                batch = []
            if i and i % 10_000 == 0:
                print(f"  {i} episodes ({time.perf_counter() - started:.0f}s)", flush=True)
        store.add_calls(batch)
        store.checkpoint()
    return time.perf_counter() - started


def timed_get(client: httpx.Client, url: str, repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - t0)
        response.raise_for_status()
    return {
        "url": url,
        "first_s": round(times[0], 4),
        "median_s": round(statistics.median(times), 4),
        "max_s": round(max(times), 4),
        "bytes": len(response.content),
    }


def measure(run: Path, repeats: int) -> dict:
    proc = subprocess.Popen(
        [sys.executable, "-m", "openforge.cli", "view", str(run), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
    )
    try:
        line = proc.stdout.readline()
        base = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)
        with TrajectoryStore.open(run, readonly=True) as store:
            total = store.count_episodes()
            middle = store.list_episodes(limit=total // 2 + 1)[-1]
        q = f"{base}/episodes?run=0&store=."
        last_page = (total + 49) // 50
        with httpx.Client(timeout=120) as client:
            client.get(f"{base}/")  # opens the store (once per server)
            pages = {
                "episodes": timed_get(client, q, repeats),
                "episodes_sorted_by_tokens": timed_get(client, f"{q}&sort=tokens&desc=1", repeats),
                "episodes_sorted_by_reward": timed_get(client, f"{q}&sort=reward&desc=1", repeats),
                "episodes_filtered": timed_get(client, f"{q}&outcome=failed&harness=react&task=task-01", repeats),
                "episodes_last_page": timed_get(client, f"{q}&page={last_page}", repeats),
                "groups": timed_get(client, f"{base}/groups?run=0&store=.&step=50", repeats),
                "episode": timed_get(client, f"{base}/episode?run=0&store=.&id={middle.id}", repeats),
                "group": timed_get(
                    client,
                    f"{base}/group?run=0&store=.&step={middle.metadata['step']}&"
                    f"task={middle.task}&harness={middle.harness}",
                    repeats,
                ),
                "run": timed_get(client, f"{base}/run?run=0", max(1, repeats // 2)),
            }
    finally:
        proc.terminate()
        proc.wait(20)
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="build the run here and keep it (reused when it exists)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "viewer.json")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="openforge-viewer-bench-"))
    run, model = work / "run", work / "model"
    if not (model / "tokenizer.json").is_file():
        build_tiny_model(model, seed=0)
    built = work / "build.json"  # how the kept run was made, so that a rerun reports it too
    if not (run / "trajectories.db").is_file():
        print(f"building {args.episodes} episodes × {args.calls} calls in {run}", flush=True)
        seconds = build(run, model, args.episodes, args.calls)
        built.write_text(json.dumps({"episodes": args.episodes, "calls": args.calls, "build_s": round(seconds, 1)}))
    made = json.loads(built.read_text()) if built.is_file() else {}
    if made and (made["episodes"], made["calls"]) != (args.episodes, args.calls):
        sys.exit(f"{run} holds {made['episodes']} episodes × {made['calls']} calls: pass those, or another --keep")
    build_s = made.get("build_s")
    pages = measure(run, args.repeats)
    result = {
        "episodes": args.episodes,
        "calls_per_episode": args.calls,
        "cpus": os.cpu_count(),
        "store_mib": round(sum(f.stat().st_size for f in run.glob("trajectories.db*")) / 2**20, 1),
        "build_s": build_s,
        "pages": pages,
        "targets_s": TARGETS_S,
        "met": {name: pages[name]["median_s"] < limit for name, limit in TARGETS_S.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, figures in pages.items():
        print(
            f"{name:28s} median {figures['median_s']:.3f}s  first {figures['first_s']:.3f}s  {figures['bytes']:>9,} B"
        )
    print(json.dumps(result["met"]))


if __name__ == "__main__":
    main()
