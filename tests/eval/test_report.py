"""The evaluation report names replies cut off by a length cap and replies the proxy could not parse, per
episode and in counts, so an agent failing for that reason is not filed as an ordinary wrong answer. Real
orchestrator, react harness and local (bubblewrap) sandbox; the run's max_new_tokens reaches react's own cap."""

from __future__ import annotations

import json

from openforge.core import Episode, FinishReason, Outcome
from openforge.eval.report import build_report, report_markdown
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.store import TrajectoryStore
from support.paths import POLICIES
from support.rollout import IMAGE_MAP, make_task

CAP = 48


async def test_cut_and_unparsed_replies_are_named_in_the_report(local_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    for task_id in ("long-reply", "garbled-reply"):
        make_task(tasks, task_id)
    config = RolloutConfig(
        tasks=[tasks],
        harnesses=["react"],
        sandbox="local",
        model=tiny_model_dir,
        backend=f"scripted:{POLICIES / 'cut_and_garbled.py'}",
        run=tmp_path / "run",
        image_map=IMAGE_MAP,
        max_new_tokens=CAP,
        max_attempts=1,
    )
    await run_rollouts(config)
    with TrajectoryStore.open(tmp_path / "run") as store:
        report = build_report(store)
        (long_episode,) = [e for e in store.list_episodes() if e.task == "long-reply"]
        (first, *_) = store.list_calls(long_episode.id)
    # the run's cap reached the harness: react asked for it, and the reply stopped there
    assert json.loads(first.request_body)["max_tokens"] == CAP
    assert first.finish_reason == FinishReason.length and len(first.output_ids) == CAP

    assert report["outcomes"][Outcome.failed.value] == 2
    assert report["length_capped_calls"] == 1 and report["parse_error_calls"] == 2
    problems = {p["task"]: p for p in report["reply_problems"]}
    assert set(problems) == {"long-reply", "garbled-reply"}
    long, garbled = problems["long-reply"], problems["garbled-reply"]
    assert long["outcome"] == "failed" and long["harness"] == "react" and long["sample"] == 0
    assert f"cut off by a length cap (finish_reason length; max_tokens {CAP}" in long["reason"]
    assert "not parsed: <tool_call> is not closed" in long["reason"]
    assert "cut off" not in garbled["reason"] and "not parsed: tool call is not valid JSON" in garbled["reason"]
    text = report_markdown(report)
    assert "## Replies cut off or not parsed (1 cut off by a length cap, 2 not parsed)" in text
    assert f"- long-reply / react (sample 0): **failed** — {long['reason']}" in text


def test_an_episode_without_a_harness_is_reported_under_a_question_mark(tmp_path):
    """The runners name every episode's task and harness; the proxy's admin API and the store's own take either as
    optional, and such an episode counts once graded (`openforge.store.final`). It is reported under "?" beside
    the named ones, where a None key among names broke the report (sorting None beside str)."""
    with TrajectoryStore.open(tmp_path / "run") as store:
        for episode_id, task, harness, reward in (("a", "t", "react", 1.0), ("b", None, None, 0.0)):
            store.create_episode(Episode(id=episode_id, key=f"key-{episode_id}", task=task, harness=harness))
            outcome = Outcome.passed if reward else Outcome.failed
            store.update_episode(episode_id, outcome=outcome, reward=reward)
        report = build_report(store)
    assert report["graded"] == 2
    assert report["by_harness"]["react"]["episodes"] == 1 and report["by_harness"]["?"]["episodes"] == 1
    assert report["by_task"]["t"]["passed"] == 1 and report["by_task"]["?"]["passed"] == 0
