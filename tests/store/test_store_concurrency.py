"""Trajectory store across processes: a writer killed with SIGKILL loses nothing it acknowledged, and
several processes writing at once lose or corrupt nothing.

Writers are separate Python processes (this module is imported by them, see `_run_child`), so the store is
exercised exactly as the proxy and orchestrator use it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from openforge.core import CallRecord, Episode, FinishReason
from openforge.store import TrajectoryStore

HERE = Path(__file__).resolve().parent
CALLS_PER_EPISODE = 10


def make_call(worker: int, n: int) -> CallRecord:
    """The n-th call of a writer, deterministic so the parent can check what a child wrote. Episodes of
    CALLS_PER_EPISODE calls whose prompts extend each other, as a harness produces them."""
    episode, index = divmod(n, CALLS_PER_EPISODE)
    rng = np.random.default_rng([worker, episode])
    base = rng.integers(0, 150_000, 200)
    outputs = rng.integers(0, 150_000, (CALLS_PER_EPISODE, 20))
    extras = rng.integers(0, 150_000, (CALLS_PER_EPISODE, 30))
    prompt = [base]
    for k in range(index):
        prompt += [outputs[k], extras[k]]
    return CallRecord(
        episode_id=f"w{worker}-e{episode}",
        index=index,
        prompt_ids=np.concatenate(prompt).tolist(),
        output_ids=outputs[index].tolist(),
        output_logprobs=np.float32(-rng.random(20)).astype(float).tolist(),  # float32-exact already
        finish_reason=FinishReason.stop,
        policy_version=worker,
        started_at=float(n),
        request_body=rng.bytes(64) + f"worker {worker} call {n}".encode(),
        metadata={"worker": worker, "n": n},
    )


def make_episode(worker: int, episode: int) -> Episode:
    return Episode(id=f"w{worker}-e{episode}", key=f"key-w{worker}-e{episode}", task=f"task-{episode % 3}")


# ---- child process bodies ----------------------------------------------------------------------------


def child_write_forever(run_dir: str, worker: int | str) -> None:
    """Write calls one by one, printing each n once add_call has returned, until killed."""
    worker = int(worker)
    store = TrajectoryStore.open(run_dir)
    n = 0
    while True:
        if n % CALLS_PER_EPISODE == 0:
            store.create_episode(make_episode(worker, n // CALLS_PER_EPISODE))
        store.add_call(make_call(worker, n))
        print(n, flush=True)
        n += 1


def child_async_write_forever(run_dir: str, worker: int) -> None:
    """Like child_write_forever through the group-commit writer, 8 episodes at a time."""
    import asyncio

    worker = int(worker)

    from openforge.store import AsyncCallWriter

    async def main() -> None:
        store = TrajectoryStore.open(run_dir)
        writer = AsyncCallWriter(store)

        async def episode_loop(episode: int) -> None:
            store.create_episode(make_episode(worker, episode))
            for index in range(CALLS_PER_EPISODE):
                n = episode * CALLS_PER_EPISODE + index
                await writer.add_call(make_call(worker, n))
                print(n, flush=True)

        episode = 0
        while True:
            await asyncio.gather(*(episode_loop(episode + k) for k in range(8)))
            episode += 8

    asyncio.run(main())


def child_write_count(run_dir: str, worker: int, count: int, go_file: str) -> None:
    """Open the (possibly not yet existing) run at the same moment as the others, then write `count` calls."""
    worker, count = int(worker), int(count)
    while not os.path.exists(go_file):
        time.sleep(0.001)
    store = TrajectoryStore.open(run_dir)
    for n in range(count):
        if n % CALLS_PER_EPISODE == 0:
            store.create_episode(make_episode(worker, n // CALLS_PER_EPISODE))
        store.add_call(make_call(worker, n))
    store.close()


def _run_child(function: str, *args: object) -> subprocess.Popen:
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); "
        f"import test_store_concurrency as t; t.{function}(*sys.argv[1:])"
    )
    argv = [sys.executable, "-c", code, *map(str, args)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ---- tests --------------------------------------------------------------------------------------------


def _kill_after_acknowledged(child: subprocess.Popen, at_least: int) -> list[int]:
    acknowledged = []
    for line in child.stdout:
        acknowledged.append(int(line))
        if len(acknowledged) >= at_least:
            os.kill(child.pid, signal.SIGKILL)  # right after add_call returned, mid-way through the next write
            break
    child.wait(timeout=30)
    if len(acknowledged) < at_least:
        pytest.fail(f"child died early: {child.stderr.read()}")
    assert child.returncode == -signal.SIGKILL
    return acknowledged


def _assert_acknowledged_survived(run_dir: Path, worker: int, acknowledged: list[int]) -> None:
    with TrajectoryStore.open(run_dir) as store:
        assert store.integrity_check() == "ok"
        for n in acknowledged:
            assert store.get_call(f"w{worker}-e{n // CALLS_PER_EPISODE}", n % CALLS_PER_EPISODE) == make_call(worker, n)
        # Anything else present is whole too: the interrupted writes either committed or vanished. (How many
        # calls the child wrote after the last one the parent read depends on scheduling: not bounded here.)
        stored = 0
        for call in store.iter_calls():
            n = int(call.episode_id.split("-e")[1]) * CALLS_PER_EPISODE + call.index
            assert call == make_call(worker, n)
            stored += 1
        assert stored >= len(acknowledged)


@pytest.mark.parametrize("child", ["child_write_forever", "child_async_write_forever"])
def test_sigkilled_writer_loses_nothing_acknowledged(tmp_path, child):
    process = _run_child(child, tmp_path, 0)
    acknowledged = _kill_after_acknowledged(process, at_least=60)
    _assert_acknowledged_survived(tmp_path, 0, acknowledged)


def test_first_write_survives_immediate_sigkill(tmp_path):
    process = _run_child("child_write_forever", tmp_path, 3)
    acknowledged = _kill_after_acknowledged(process, at_least=1)
    _assert_acknowledged_survived(tmp_path, 3, acknowledged)


def test_four_processes_write_1000_calls_each(tmp_path):
    run_dir, go_file, workers, count = tmp_path / "run", tmp_path / "go", 4, 1000
    children = [_run_child("child_write_count", run_dir, w, count, go_file) for w in range(workers)]
    go_file.touch()  # all open a not-yet-existing store at once: schema creation races too
    for child in children:
        _, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, stderr
    with TrajectoryStore.open(run_dir) as store:
        assert store.integrity_check() == "ok"
        assert store.count_calls() == workers * count
        assert store.count_episodes() == workers * count // CALLS_PER_EPISODE
        seen = 0
        for call in store.iter_calls():
            worker = int(call.episode_id[1 : call.episode_id.index("-")])
            n = int(call.episode_id.split("-e")[1]) * CALLS_PER_EPISODE + call.index
            assert call == make_call(worker, n)
            seen += 1
        assert seen == workers * count
        # The writers really overlapped: in commit order, the writing worker changes many times.
        order = [r[0] for r in store._conn().execute("SELECT episode_id FROM calls ORDER BY rowid")]
        switches = sum(a.split("-")[0] != b.split("-")[0] for a, b in zip(order, order[1:]))
        assert switches >= workers
