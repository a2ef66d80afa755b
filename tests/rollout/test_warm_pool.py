"""Warm sandboxes against the real Docker daemon: episodes take sandboxes started ahead of them, each is used
once (a reused one fails its episode), and nothing the pool started is left behind — after a run, after closing
the pool while sandboxes are still starting, and after Ctrl-C (tests/rollout/test_orchestrator.py's Ctrl-C test
runs with the default pool)."""

from __future__ import annotations

import asyncio

from conftest import managed_containers
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.rollout.orchestrator import run_label
from openforge.rollout.task_environment import make_sandbox_spec
from openforge.rollout.warm_pool import WarmPool
from openforge.sandbox import get_provider
from openforge.store import TrajectoryStore
from openforge.tasks import ImageMap, load_tasks
from support.rollout import IMAGE_MAP, make_task

# fails when the sandbox was used before: the work area must be as the task's image has it
ONCE = "test ! -e /app/used && touch /app/used && touch done.txt\n"


def ours(label: str) -> list[str]:
    return [n for n in managed_containers() if label in n]


async def test_episodes_take_warm_sandboxes_once_and_nothing_is_left(docker_ready, tmp_path, tiny_model_dir):
    for name in ("one", "two"):
        make_task(tmp_path / "tasks", name, solve=ONCE)
    results = {}
    for warm in (2, 0):
        run = tmp_path / f"run-{warm}"
        summary = await run_rollouts(
            RolloutConfig(
                tasks=[tmp_path / "tasks"],
                samples=4,
                concurrency=2,
                warm_sandboxes=warm,
                model=tiny_model_dir,
                backend="oracle",
                sandbox="docker",
                image_map=IMAGE_MAP,
                run=run,
            )
        )
        with TrajectoryStore.open(run) as store:
            finals = [e for e in store.list_episodes() if e.metadata.get("final")]
        assert sorted(e.reward for e in finals) == [1.0] * 8, [(e.outcome, e.outcome_reason) for e in finals]
        assert not ours(run_label(run))
        results[warm] = summary.warm
    assert results[2].hits >= 6 and results[2].hits + results[2].misses == 8
    assert results[2].peak_live == 2
    assert results[0].hits == 0 and results[0].misses == 8 and results[0].peak_live == 0


async def test_a_pool_closed_while_starting_leaves_nothing(docker_ready, tmp_path):
    task = load_tasks([make_task(tmp_path / "tasks", "one")])[0]
    provider = get_provider("docker")
    label = "warmclose"
    spec = make_sandbox_spec(task, ImageMap(IMAGE_MAP), name="of-warmclose-x", run=label)
    try:
        pool = WarmPool(provider, 3, label)
        assert [pool.reserve(f"slot-{i}", task, spec) for i in range(4)] == [True, True, True, False]
        taken = await pool.take(task, spec)  # one of them, ready
        assert pool.stats.hits == 1 and pool.room == 1
        await asyncio.sleep(0.05)
        await pool.close()  # the other two: mid-start or ready
        assert pool.room == 0 and not pool.reserve("late", task, spec)
        assert [n for n in ours(label) if taken.sandbox.name not in n] == []  # (its grader's name holds it)
        assert (await taken.sandbox.exec(["true"], timeout_s=30)).ok  # the one handed out is the episode's to destroy
        assert await taken.release() is None
        assert not ours(label)
    finally:
        await provider.cleanup(label)
        await provider.close()
