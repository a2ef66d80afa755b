"""Validating tasks by running them in the real local sandbox (bubblewrap): the reference solution scores 1,
wrong.sh below 1, for a sample of the shipped examples and a generated task (every example with
OPENFORGE_ALL_TASKS=1)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from openforge.tasks import ImageMap, generate_family_tasks, load_task, load_tasks, validate_task_by_running
from openforge.tasks.validate import run_script_and_verify

from support.paths import EXAMPLES
IMAGE_MAP = ImageMap.load(EXAMPLES / "image-map.yaml")


def _local_provider(tmp_path):
    pytest.importorskip("openforge.sandbox")
    from openforge.sandbox import get_provider, local_available

    ok, why = local_available()
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the local sandbox is unavailable in CI: {why}")
        pytest.skip(f"the local sandbox is unavailable: {why}")
    return get_provider("local", root=tmp_path / "sandboxes")


SAMPLE = ["fix-sum-range", "run-script", "organize-by-extension", "csv-top-scorer"]


def test_examples_validate_in_the_local_sandbox(tmp_path):
    provider = _local_provider(tmp_path)
    tasks = load_tasks(EXAMPLES)
    if os.environ.get("OPENFORGE_ALL_TASKS") != "1":
        tasks = [t for t in tasks if t.id in SAMPLE]

    async def main():
        results = [await validate_task_by_running(t, provider, IMAGE_MAP) for t in tasks]
        assert await provider.list("openforge-validate") == []  # nothing left behind
        return results

    for r in asyncio.run(main()):
        assert r.ok, r.summary()
        assert r.solve_reward == 1.0 and r.wrong_reward is not None and r.wrong_reward < 1.0


def test_do_nothing_fails_and_generated_task_validates(tmp_path):
    provider = _local_provider(tmp_path)
    task = load_task(EXAMPLES / "heldout" / "dedupe-contacts")
    (gen,) = generate_family_tasks("append_line", tmp_path / "gen", n=1, seed=3, split="heldout")
    gtask = load_task(gen)

    async def main():
        noop = await run_script_and_verify(task, provider, IMAGE_MAP, None, "nothing")
        res = await validate_task_by_running(gtask, provider, IMAGE_MAP)
        return noop, res

    noop, res = asyncio.run(main())
    assert noop.error is None and noop.reward == 0.0
    assert res.ok and res.solve_reward == 1.0 and res.wrong_reward == 0.0, res.summary()
