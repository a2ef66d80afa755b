"""Trajectory store benchmark: durable write throughput (1 and 8 writer processes) and bytes per token,
side by side with two naive layouts so the ratios mean something.

Workload (realistic for agent harnesses): episodes of `--calls` calls; the first prompt has
`--first-prompt` tokens (system prompt + tool schemas), and each next prompt is the previous prompt + the
previous output + a tool result, growing by `--growth` tokens per call; outputs have `--output-tokens`
tokens with logprobs. Token ids are uniform over a 152k vocabulary (incompressible: the worst case for
zlib). Bodies are left empty: this measures token storage.

"Durably" means what the store promises: committed in WAL mode with synchronous=NORMAL before add_call
returns, so it survives the writer being killed (not power loss); every layout uses the same settings.

Layouts:
  openforge    TrajectoryStore: prompts prefix-shared with the previous call, int32/float32 blobs, zlib tails
  int32-whole  every prompt stored whole as an int32 blob (compact arrays, no prefix sharing)
  json-lists   every prompt, output and logprob list stored whole as JSON text

    python benchmarks/store.py            # ~1 minute on 2 cores
    python benchmarks/store.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openforge.core import CallRecord, Episode  # noqa: E402
from openforge.store import AsyncCallWriter, TrajectoryStore  # noqa: E402
from openforge.store.connection import connect, enable_wal, write_transaction  # noqa: E402

VOCAB = 151_936


@dataclass(frozen=True)
class Workload:
    calls: int
    first_prompt: int
    growth: int
    output_tokens: int


def episode_calls(workload: Workload, episode_id: str, seed: int) -> list[CallRecord]:
    rng = np.random.default_rng(seed)
    prompt = rng.integers(0, VOCAB, workload.first_prompt)
    calls = []
    for index in range(workload.calls):
        output = rng.integers(0, VOCAB, workload.output_tokens)
        calls.append(
            CallRecord(
                episode_id=episode_id,
                index=index,
                prompt_ids=prompt.tolist(),
                output_ids=output.tolist(),
                output_logprobs=(-rng.exponential(size=workload.output_tokens)).tolist(),
            )
        )
        tool_result = rng.integers(0, VOCAB, workload.growth - workload.output_tokens)
        prompt = np.concatenate([prompt, output, tool_result])
    return calls


# ---- layouts ------------------------------------------------------------------------------------------


class OpenForgeLayout:
    name = "openforge"

    def __init__(self, run_dir: Path):
        self.store = TrajectoryStore.open(run_dir)
        self.path = self.store.path

    def create_episode(self, episode_id: str) -> None:
        self.store.create_episode(Episode(id=episode_id, key=f"key-{episode_id}"))

    def add_call(self, call: CallRecord) -> None:
        self.store.add_call(call)

    def close(self) -> None:
        self.store.checkpoint()
        self.store.close()


class NaiveLayout:
    """A plain table, one committed transaction per call, same SQLite settings as the store."""

    def __init__(self, run_dir: Path, encoding: str):
        self.name = encoding
        self.encoding = encoding
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / f"{encoding}.db"
        self.conn = connect(str(self.path))
        enable_wal(self.conn)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS calls (episode_id TEXT, idx INTEGER, prompt_ids BLOB, output_ids BLOB, "
            "output_logprobs BLOB, PRIMARY KEY (episode_id, idx))"
        )

    def create_episode(self, episode_id: str) -> None:
        pass

    def _encode(self, call: CallRecord) -> tuple:
        if self.encoding == "json-lists":
            return (json.dumps(call.prompt_ids), json.dumps(call.output_ids), json.dumps(call.output_logprobs))
        return (
            np.asarray(call.prompt_ids, "<i4").tobytes(),
            np.asarray(call.output_ids, "<i4").tobytes(),
            np.asarray(call.output_logprobs, "<f4").tobytes(),
        )

    def add_call(self, call: CallRecord) -> None:
        values = self._encode(call)
        with write_transaction(self.conn):
            self.conn.execute("INSERT INTO calls VALUES (?, ?, ?, ?, ?)", (call.episode_id, call.index, *values))

    def close(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()


def open_layout(name: str, run_dir: Path):
    return OpenForgeLayout(run_dir) if name == "openforge" else NaiveLayout(run_dir, name)


LAYOUTS = ("openforge", "int32-whole", "json-lists")


# ---- runs ---------------------------------------------------------------------------------------------


def writer_process(layout_name, run_dir, workload, worker, episodes, barrier, results) -> None:
    """Build this writer's calls, wait for the others, then write them one durable call at a time."""
    calls = []
    for e in range(episodes):
        calls += episode_calls(workload, f"w{worker}-e{e}", seed=worker * 1000 + e)
    layout = open_layout(layout_name, Path(run_dir))
    barrier.wait()
    start = time.monotonic()
    for call in calls:
        if call.index == 0:
            layout.create_episode(call.episode_id)
        layout.add_call(call)
    end = time.monotonic()
    tokens = sum(len(c.prompt_ids) + len(c.output_ids) for c in calls)
    layout.close()
    results.put((start, end, len(calls), tokens))


def run_writers(layout_name: str, run_dir: Path, workload: Workload, writers: int, episodes: int) -> dict:
    ctx = mp.get_context("spawn")  # a fresh interpreter per writer, as separate proxies would be
    barrier, results = ctx.Barrier(writers), ctx.Queue()
    procs = [
        ctx.Process(target=writer_process, args=(layout_name, str(run_dir), workload, w, episodes, barrier, results))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    outs = [results.get() for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"writer exited with {p.exitcode}")
    start, end = min(o[0] for o in outs), max(o[1] for o in outs)
    calls, tokens = sum(o[2] for o in outs), sum(o[3] for o in outs)
    db = open_layout(layout_name, run_dir).path
    # The main file and the WAL hold the data; -shm is a transient index.
    size = sum(f.stat().st_size for f in (db, db.with_name(db.name + "-wal")) if f.exists())
    return {"calls_per_s": calls / (end - start), "calls": calls, "tokens": tokens, "bytes": size}


def run_group_commit(run_dir: Path, workload: Workload, episodes: int) -> float:
    """One process, `episodes` episodes in flight at once through AsyncCallWriter; returns calls/s."""
    per_episode = [episode_calls(workload, f"a{e}", seed=50_000 + e) for e in range(episodes)]
    store = TrajectoryStore.open(run_dir)
    for e in range(episodes):
        store.create_episode(Episode(id=f"a{e}", key=f"key-a{e}"))

    async def main() -> float:
        async with AsyncCallWriter(store) as writer:

            async def episode(calls):
                for call in calls:
                    await writer.add_call(call)

            start = time.monotonic()
            await asyncio.gather(*(episode(c) for c in per_episode))
            return time.monotonic() - start

    seconds = asyncio.run(main())
    store.close()
    return sum(len(c) for c in per_episode) / seconds


def read_back_rate(run_dir: Path) -> tuple[float, float]:
    """Calls/s and tokens/s reconstructing every call of the run from a cold store."""
    with TrajectoryStore.open(run_dir) as store:
        start, calls, tokens = time.monotonic(), 0, 0
        for call in store.iter_calls():
            calls += 1
            tokens += len(call.prompt_ids) + len(call.output_ids)
        seconds = time.monotonic() - start
    return calls / seconds, tokens / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20, help="calls per episode")
    parser.add_argument("--first-prompt", type=int, default=8000, help="tokens in the first prompt")
    parser.add_argument("--growth", type=int, default=2000, help="prompt growth per call, in tokens")
    parser.add_argument("--output-tokens", type=int, default=300, help="sampled tokens per call")
    parser.add_argument("--episodes", type=int, default=8, help="episodes written by the single writer")
    parser.add_argument("--episodes-per-writer", type=int, default=4, help="episodes per writer with 8 writers")
    parser.add_argument("--quick", action="store_true", help="a small workload, for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.first_prompt, args.growth, args.output_tokens, args.episodes = 8, 2000, 500, 100, 2
    workload = Workload(args.calls, args.first_prompt, args.growth, args.output_tokens)
    final_prompt = workload.first_prompt + (workload.calls - 1) * workload.growth

    print(
        f"workload: episodes of {workload.calls} calls, prompt {workload.first_prompt} -> {final_prompt} tokens "
        f"(+{workload.growth}/call), {workload.output_tokens} output tokens/call; {os.cpu_count()} CPUs; "
        f"SQLite {sqlite3.sqlite_version}"
    )
    print(f"{'layout':<12} {'1 writer calls/s':>17} {'8 writers calls/s':>18} {'bytes/token':>12} {'DB MB':>8}")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in LAYOUTS:
            one = run_writers(name, Path(tmp) / name / "one", workload, 1, args.episodes)
            eight = run_writers(name, Path(tmp) / name / "eight", workload, 8, args.episodes_per_writer)
            rows[name] = one
            print(
                f"{name:<12} {one['calls_per_s']:>17.1f} {eight['calls_per_s']:>18.1f} "
                f"{one['bytes'] / one['tokens']:>12.3f} {one['bytes'] / 1e6:>8.1f}"
            )
        ours = rows["openforge"]["bytes"] / rows["openforge"]["tokens"]
        for name in LAYOUTS[1:]:
            theirs = rows[name]["bytes"] / rows[name]["tokens"]
            print(f"  {name} uses {theirs / ours:.1f}x the bytes per token of openforge")
        tokens = rows["openforge"]["tokens"]
        unique = args.episodes * (final_prompt + workload.output_tokens)
        print(
            f"  tokens per episode summed over calls: {tokens // args.episodes}; unique tokens per episode: "
            f"{unique // args.episodes} -> openforge bytes per unique token: {rows['openforge']['bytes'] / unique:.2f}"
        )
        group = run_group_commit(Path(tmp) / "group", workload, episodes=16)
        print(f"group commit (AsyncCallWriter, 16 episodes in flight, 1 process): {group:.1f} calls/s")
        calls_s, tokens_s = read_back_rate(Path(tmp) / "openforge" / "one")
        print(f"read back (cold store, iter_calls): {calls_s:.1f} calls/s, {tokens_s / 1e6:.1f} M tokens/s")


if __name__ == "__main__":
    main()
