"""Whose a verifier error is (`openforge.rollout.attribution`): an agent that locks its verifier out of the work
area (`chmod 000`) is graded `verifier_failed`, reward 0 — a sample of its own failure, not an infrastructure
error that retries and hides it from training — because the same verifier gives a reward on the task's untouched
initial state; a verifier that fails there too stays `verifier_error`. Through the real orchestrator in the local
sandbox and in Docker (react harness, scripted policy), then the untouched run itself: once per task, kept in
the run's store, nothing kept when its sandbox fails."""

from __future__ import annotations

import asyncio

import pytest

from openforge.core import Outcome
from openforge.eval.report import build_report
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.rollout.attribution import RUN_INFO_KEY, VerifierBaselines
from openforge.rollout.outcome import AttemptResult
from openforge.sandbox import get_provider
from openforge.store import TrajectoryStore
from openforge.tasks import ImageMap, load_task
from openforge.tasks.digest import task_content_hash
from openforge.train.assemble import drop_reason
from openforge.view.summary import summarize
from support.paths import POLICIES
from support.rollout import IMAGE_MAP, make_task

# Writes a reward on the untouched state (0: nothing done), none when it cannot enter the work area.
LOCKABLE_VERIFIER = (
    "set -e\nmkdir -p /logs/verifier\ncd /app\n"
    "if [ -f done.txt ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
)
CRASHING_VERIFIER = "echo 'assertion machinery broke' >&2\nexit 3\n"


@pytest.mark.parametrize("sandbox", ["local", "docker"])
async def test_an_agent_that_locks_its_verifier_out_gets_reward_0(sandbox, request, tmp_path, tiny_model_dir):
    request.getfixturevalue("local_ready" if sandbox == "local" else "docker_ready")
    tasks = tmp_path / "tasks"
    make_task(tasks, "lock-workdir", test_sh=LOCKABLE_VERIFIER)  # the policy runs `chmod 000 "$PWD"`
    make_task(tasks, "verifier-crash", test_sh=CRASHING_VERIFIER)  # the policy does nothing
    options = {"sandbox_options": {"root": str(tmp_path / "sandboxes")}} if sandbox == "local" else {}
    summary = await run_rollouts(
        RolloutConfig(
            tasks=[tasks],
            harnesses=["react"],
            sandbox=sandbox,
            model=tiny_model_dir,
            backend=f"scripted:{POLICIES / 'rollout_chaos.py'}",
            run=tmp_path / "run",
            image_map=IMAGE_MAP,
            max_attempts=2,
            **options,
        )
    )
    with TrajectoryStore.open(tmp_path / "run") as store:
        episodes = store.list_episodes()
        by_task = {e.task: [x for x in episodes if x.task == e.task] for e in episodes}
        locked_result = store.get_verifier_result(by_task["lock-workdir"][0].id)
        baselines = store.get_run_info()[RUN_INFO_KEY]
        report = build_report(store)
        viewer = summarize(store)
        groups = {g.task: g for g in store.query_groups()[0]}
    (locked,) = by_task["lock-workdir"]  # the agent's doing: graded once, not retried
    assert (locked.outcome, locked.reward) == (Outcome.verifier_failed, 0.0), locked.outcome_reason
    assert locked.outcome_reason.startswith("the agent made the verifier fail: "), locked.outcome_reason
    assert "on the task's untouched initial state it runs without error: reward 0" in locked.outcome_reason
    assert locked_result is not None and locked_result["details"]["outcome"] == "verifier_failed"
    crashed = by_task["verifier-crash"]  # the verifier's own failure: retried, never a reward
    assert [e.outcome for e in crashed] == [Outcome.verifier_error] * 2 and all(e.reward is None for e in crashed)
    assert "fails on the task's untouched initial state too" in crashed[-1].outcome_reason
    assert "exited 3" in crashed[-1].outcome_reason
    # each task's untouched run is kept in the run's store under its content hash
    lock_task, crash_task = load_task(tasks / "lock-workdir"), load_task(tasks / "verifier-crash")
    assert baselines[task_content_hash(lock_task)]["clean"] is True
    assert baselines[task_content_hash(crash_task)]["clean"] is False
    # a graded sample everywhere: the run's summary, pass@1, the report's outcomes
    assert summary.graded == 1 and summary.outcomes == {"verifier_failed": 1, "verifier_error": 1}
    assert report["graded"] == 1 and report["pass_at_k"]["1"] == 0.0
    assert report["outcomes"]["verifier_failed"] == 1 and report["outcomes"]["verifier_error"] == 1
    assert viewer.graded == 1 and viewer.pass_at_1 == 0.0
    assert (groups["lock-workdir"].graded, groups["verifier-crash"].graded) == (1, 0)
    assert drop_reason(locked) is None and drop_reason(crashed[-1]) == "verifier_error"  # trained on, or not


async def test_the_untouched_run_is_made_once_per_task_and_kept_in_the_store(local_ready, tmp_path):
    provider = get_provider("local", root=tmp_path / "sandboxes")
    created: list[str] = []
    create = provider.create

    async def counting_create(spec):
        created.append(spec.name)
        return await create(spec)

    provider.create = counting_create  # the real provider, its sandboxes counted
    task = load_task(make_task(tmp_path / "tasks", "lockable", test_sh=LOCKABLE_VERIFIER))
    try:
        with TrajectoryStore.open(tmp_path / "run") as store:
            first = AttemptResult("e0", Outcome.verifier_error, reason="no reward")
            baselines = VerifierBaselines(provider, ImageMap(IMAGE_MAP), "pytest-attribution", store)
            await baselines.attribute(task, first, None)
            one_run = len(created)  # the sandboxes of one untouched run (with its grader, where grading has one)
            assert one_run >= 1 and (first.outcome, first.reward) == (Outcome.verifier_failed, 0.0)
            assert first.timings["attribution_s"] > 0
            # three verifier errors of one task at once, in a run that knows nothing yet: one untouched run
            in_memory = VerifierBaselines(provider, ImageMap(IMAGE_MAP), "pytest-attribution", None)
            results = [AttemptResult(f"e{i}", Outcome.verifier_error, reason="no reward") for i in range(1, 4)]
            await asyncio.gather(*(in_memory.attribute(task, r, None) for r in results))
            assert len(created) == 2 * one_run
            assert {(r.outcome, r.reward) for r in results} == {(Outcome.verifier_failed, 0.0)}
            # a later step, or a resumed run: the answer comes from the run's store, no sandbox
            later = AttemptResult("e4", Outcome.verifier_error, reason="no reward")
            await VerifierBaselines(provider, ImageMap(IMAGE_MAP), "pytest-attribution", store).attribute(
                task, later, None
            )
            assert len(created) == 2 * one_run and later.outcome == Outcome.verifier_failed
            # a task whose environment cannot be set up: nothing is attributed, nothing kept
            broken_dir = make_task(tmp_path / "tasks", "broken", test_sh=LOCKABLE_VERIFIER)
            (broken_dir / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nRUN exit 7\n")
            broken = load_task(broken_dir)
            unknown = AttemptResult("e5", Outcome.verifier_error, reason="no reward")
            await baselines.attribute(broken, unknown, None)
            assert (unknown.outcome, unknown.reward) == (Outcome.verifier_error, None)
            assert "not attributed: the untouched initial state could not be checked" in unknown.reason
            assert set(store.get_run_info()[RUN_INFO_KEY]) == {task_content_hash(task)}
    finally:
        await provider.close()
