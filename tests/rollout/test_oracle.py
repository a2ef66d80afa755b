"""The oracle teacher: the task's reference solution through the harness's own shell tool, then done — the
same command `tasks validate --run` runs, never cut at a harness's max_tokens, and, where the context window
does cut it, named in the report."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import unavailable
from openforge.core import FinishReason, Outcome
from openforge.eval.report import build_report
from openforge.harness.bundle import bundle_status, default_bundle_dir
from openforge.models import ModelDir
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.rollout.validate import validate_task_by_running
from openforge.sandbox import get_provider
from openforge.store import TrajectoryStore
from openforge.tasks import ImageMap, load_tasks, solution_script
from support.proxy import in_process_proxy
from support.rollout import EXAMPLES, IMAGE_MAP

SOLUTION = "mkdir -p out\nprintf 'blue 42\\n' > out/a.txt\n"
BASH = {
    "type": "function",
    "function": {"name": "Bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
}
EXEC = {
    "type": "function",
    "function": {"name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
}


@pytest.mark.parametrize("tool,shell_tool", [(BASH, ["Bash", "command"]), (EXEC, None)])
async def test_oracle_sends_the_solution_through_the_shell_tool(tmp_path, tiny_model_dir, tool, shell_tool):
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend="oracle") as proxy:
        task = {"id": "t", "solution": SOLUTION, **({"shell_tool": shell_tool} if shell_tool else {})}
        _, key = await proxy.new_episode(task=task)
        client = proxy.openai(key)
        messages = [{"role": "user", "content": "make out/a.txt"}]
        first = (await client.chat.completions.create(model="m", messages=messages, tools=[tool])).choices[0].message
        (call,) = first.tool_calls
        assert call.function.name == tool["function"]["name"]
        argument = "command" if tool is BASH else "cmd"
        assert json.loads(call.function.arguments) == {argument: SOLUTION}
        messages += [first.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": ""}]
        second = (await client.chat.completions.create(model="m", messages=messages, tools=[tool])).choices[0].message
        assert second.content == "Done." and not second.tool_calls


async def test_oracle_without_a_solution_fails_clearly_and_is_recorded(tmp_path, tiny_model_dir):
    import openai

    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend="oracle") as proxy:
        episode_id, key = await proxy.new_episode(task="plain-name")
        with pytest.raises(openai.APIStatusError) as e:
            await proxy.openai(key).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}], tools=[BASH]
            )
        assert e.value.status_code == 503
        (call,) = proxy.store.list_calls(episode_id)
        assert "reference solution" in call.call_error


async def test_oracle_reply_is_never_cut_at_max_tokens(tmp_path, tiny_model_dir):
    """The reply is the fixed reference solution, not a sample: a harness's small max_tokens does not cut it."""
    solution = "\n".join(f"echo line {i} >> out.txt" for i in range(60))
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend="oracle") as proxy:
        episode_id, key = await proxy.new_episode(
            task={"id": "t", "solution": solution, "shell_tool": ["Bash", "command"]}
        )
        reply = await proxy.openai(key).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], tools=[BASH], max_tokens=16
        )
        (call,) = reply.choices[0].message.tool_calls
        assert json.loads(call.function.arguments) == {"command": solution}
        (record,) = proxy.store.list_calls(episode_id)
        assert record.finish_reason == FinishReason.stop and record.parse_error is None
        assert record.sampling.max_tokens == 16 and len(record.output_ids) > 16


# ---- shipped tasks whose solutions read files beside solve.sh, in Docker ----------------------------------

HELPER_TASKS = ["sales-rollup", "migrate-service-config"]


def helper_tasks():
    return [t for t in load_tasks([EXAMPLES]) if t.id in HELPER_TASKS]


async def test_validate_runs_the_helper_file_tasks_in_docker(docker_ready):
    provider = get_provider("docker")
    try:
        results = [await validate_task_by_running(t, provider, ImageMap.from_config(IMAGE_MAP)) for t in helper_tasks()]
    finally:
        await provider.close()
    assert len(results) == 2
    for r in results:
        assert r.ok and r.solve_reward == 1.0 and r.wrong_reward < 1.0, r.summary()


@pytest.mark.parametrize("harness", ["react", "claude-code", "codex"])
async def test_oracle_solves_the_helper_file_tasks_through_real_harnesses(
    docker_ready, tmp_path, tiny_model_dir, harness
):
    """The oracle sends the same command `validate --run` runs (the directory inside it, CRLF gone), longer
    than 512 tokens, whole, through each harness's own shell tool; every episode scores 1.0."""
    if harness != "react" and not bundle_status(default_bundle_dir()).get(harness):
        unavailable(f"{harness} is not in the harness bundle: run `openforge harness install`")
    config = RolloutConfig(
        tasks=[EXAMPLES],
        task_ids=HELPER_TASKS,
        harnesses=[harness],
        sandbox="docker",
        model=tiny_model_dir,
        backend="oracle",
        run=tmp_path / "run",
        image_map=IMAGE_MAP,
        max_attempts=1,
    )
    await run_rollouts(config)
    commands = {t.id: solution_script(t.solve_script) for t in helper_tasks()}
    model = ModelDir(tiny_model_dir)
    with TrajectoryStore.open(tmp_path / "run") as store:
        episodes = [e for e in store.list_episodes() if e.metadata.get("final")]
        assert sorted(e.task for e in episodes) == sorted(HELPER_TASKS)
        assert all(e.outcome == Outcome.passed and e.reward == 1.0 for e in episodes), [
            (e.task, e.outcome, e.outcome_reason) for e in episodes
        ]
        for e in episodes:
            first = next(c for c in store.list_calls(e.id) if not c.side_call)
            assert first.finish_reason == FinishReason.stop and first.parse_error is None
            assert len(first.output_ids) > 512
            assert json.dumps(commands[e.task], ensure_ascii=False) in model.decode(first.output_ids)
        assert all(len(model.tokenizer.encode(c, add_special_tokens=False).ids) > 512 for c in commands.values())
        assert build_report(store)["reply_problems"] == []


async def test_an_oracle_cut_by_the_context_window_shows_why_in_the_report(local_ready, tmp_path, tiny_model_dir):
    """With a context too short for the solution, the oracle's reply is cut: the episode fails, and the report
    says it was cut off, not just that the agent failed."""
    small = tmp_path / "small-context-model"
    shutil.copytree(tiny_model_dir, small)
    config_json = json.loads((small / "config.json").read_text())
    (small / "config.json").write_text(json.dumps({**config_json, "max_position_embeddings": 1024}))
    config = RolloutConfig(
        tasks=[EXAMPLES],
        task_ids=["sales-rollup"],
        harnesses=["react"],
        sandbox="local",
        model=small,
        backend="oracle",
        run=tmp_path / "run",
        image_map=IMAGE_MAP,
        max_attempts=1,
    )
    await run_rollouts(config)
    with TrajectoryStore.open(tmp_path / "run") as store:
        (episode,) = store.list_episodes()
        report = build_report(store)
    assert episode.outcome == Outcome.failed
    (problem,) = report["reply_problems"]
    assert problem["task"] == "sales-rollup" and problem["outcome"] == "failed"
    assert "cut off by a length cap (finish_reason length" in problem["reason"], problem
    assert report["length_capped_calls"] == 1
