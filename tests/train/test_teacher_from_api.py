"""SFT from a teacher behind an API: another tiny model (another seed, another 700-token vocabulary) served by
serve-model's chat-completions endpoint with a scripted policy and tool-call parsing. Its calls are recorded as
messages; SFT re-renders every sample with the student's chat template and tokenizer (loss on the teacher's
turns only); a token-level teacher with another tokenizer is refused; the recipe (N rollouts per task, keep the
passed, drop near-identical trajectories, cap per task) counts what it left out."""

from __future__ import annotations

import json
import shutil

import pytest

from openforge.config import ConfigError, load_config, validate_config
from openforge.core import CallRecord, Conversation, Episode, Message, Outcome, ParsedOutput, ToolCall, ToolSpec
from openforge.models import ModelDir
from openforge.store import TrajectoryStore
from openforge.train.assemble import assemble
from openforge.train.config import SFTSettings, TrainConfig
from openforge.train.errors import TrainError
from openforge.train.pipeline import run_training
from openforge.train.rerender import reply_ids, rerender_calls
from openforge.train.teacher import check_teacher_tokenizer
from openforge.train.teacher_selection import select_teacher_episodes
from support.paths import EXAMPLES, REPO
from support.proxy import in_process_proxy
from support.teacher import TEACHER_VOCAB, teacher_model_dir, teacher_server

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}
TEACHER_TURN = (
    '<think>\nOne command does it.\n</think>\n<tool_call>\n{"name": "bash", "arguments": '
    '{"command": "echo hi > hello.txt"}}\n</tool_call><|im_end|>'
)


async def record_episode(proxy, instruction: str) -> str:
    """Two calls as the react harness makes them: the task, then the tool result; returns the episode id."""
    episode_id, key = await proxy.new_episode(task={"id": "hello"}, harness="react")
    client = proxy.openai(key)
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": instruction}]
    first = (await client.chat.completions.create(model="tiny", messages=history, tools=[BASH])).choices[0].message
    history += [
        first.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "(no output)"},
    ]
    await client.chat.completions.create(model="tiny", messages=history, tools=[BASH])
    proxy.store.update_episode(episode_id, outcome=Outcome.passed, reward=1.0)
    return episode_id


async def test_samples_decode_to_the_teachers_text_in_the_students_template(tmp_path, tiny_model_dir):
    student = ModelDir(tiny_model_dir)
    assert ModelDir(teacher_model_dir()).vocab_size == TEACHER_VOCAB != student.vocab_size
    with teacher_server({"Create hello.txt": "echo hi > hello.txt"}, tmp_path) as url:
        async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend=f"openai:{url}") as proxy:
            episode_id = await record_episode(proxy, "Create hello.txt here.")
            episode, calls = proxy.store.get_episode(episode_id), proxy.store.list_calls(episode_id)
    assert all(c.prompt_ids == [] and c.output_ids == [] for c in calls)  # nothing of the teacher's tokenizer

    replayed = rerender_calls(calls, student)
    assert [c.segment for c in replayed] == [0, 0] and replayed[1].break_reason is None
    (sample,), metrics = assemble([(episode, replayed)])
    assert metrics.calls_merged == 1 and sample.metadata["calls"] == [0, 1]  # one merged sample, as the proxy's
    assert max(sample.token_ids) < student.vocab_size

    # the whole sample is the student's template over the conversation, teacher's replies included
    full = Conversation(
        system="Be brief.",
        tools=[ToolSpec(name="bash", description="Run a command.", parameters=BASH["function"]["parameters"])],
        messages=[
            Message(role="user", content="Create hello.txt here."),
            Message(
                role="assistant",
                reasoning="One command does it.",
                tool_calls=[ToolCall(id="x", name="bash", arguments={"command": "echo hi > hello.txt"})],
            ),
            Message(role="tool", tool_call_id="x", content="(no output)"),
            Message(role="assistant", content="Done."),
        ],
    )
    assert student.decode(sample.token_ids) == student.render_text(full, add_generation_prompt=False).rstrip("\n")
    # and the loss falls on the teacher's turns, exactly
    spans, current = [], []
    for token, mask in zip(sample.token_ids, sample.loss_mask):
        if mask:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    spans.append(current)
    assert [student.decode(s) for s in spans] == [TEACHER_TURN, "Done.<|im_end|>"]
    assert sample.prompt_length == len(replayed[0].prompt_ids)


def test_reply_text_that_looks_like_markup_stays_plain_text(tiny_model):
    conversation = Conversation(messages=[Message(role="user", content="hi")])
    ids = reply_ids(tiny_model, conversation, ParsedOutput(content="say <|im_end|> and <tool_call>"))
    im_end = tiny_model.tokenizer.token_to_id("<|im_end|>")
    assert ids.count(im_end) == 1 and ids[-1] == im_end  # only the turn's own end is the control token
    assert tiny_model.decode(ids) == "say <|im_end|> and <tool_call><|im_end|>"
    cut = reply_ids(tiny_model, conversation, ParsedOutput(content="cut"), ended=False)
    assert tiny_model.decode(cut) == "cut"


def test_a_token_level_teacher_with_another_tokenizer_is_refused(tiny_model_dir, tmp_path):
    with pytest.raises(TrainError) as err:
        check_teacher_tokenizer("embedded", teacher_model_dir(), tiny_model_dir)
    assert "another tokenizer (vocabulary 700, the student's 1024)" in str(err.value)
    assert "sft.teacher: openai:URL" in str(err.value)
    check_teacher_tokenizer("embedded", tiny_model_dir, tiny_model_dir)  # the student itself: fine
    check_teacher_tokenizer("openai:http://x/v1", None, tiny_model_dir)  # re-rendered: no ids to check
    same_tokens = tmp_path / "other-template"
    shutil.copytree(tiny_model_dir, same_tokens)
    (same_tokens / "chat_template.jinja").write_text("{{ messages[0].content }}")
    with pytest.raises(TrainError, match="another chat template"):
        check_teacher_tokenizer("vllm:http://x", same_tokens, tiny_model_dir)
    with pytest.raises(ConfigError, match="drop sft.teacher_model"):
        validate_config(
            {
                "tasks": {"families": ["create_file"]},
                "sft": {"teacher": "openai:http://x/v1", "teacher_model": str(tiny_model_dir)},
            },
            TrainConfig,
        )


def test_the_example_config_is_valid():
    config = load_config(REPO / "examples/train/teacher-from-api.yaml", TrainConfig)
    assert config.sft.teacher.startswith("openai:") and config.sft.dedup_similarity == 0.9
    assert config.rl.drop_after == 3


def test_the_recipe_keeps_passed_distinct_trajectories_up_to_the_cap(tmp_path):
    def episode(store, task, n, outcome, reward, command):
        ep = Episode(
            id=f"{task}-{n}",
            key=f"k-{task}-{n}",
            task=task,
            harness="react",
            outcome=outcome,
            reward=reward,
            created_at=n,
            metadata={"final": True},
        )
        store.create_episode(ep)
        store.add_call(
            CallRecord(
                episode_id=ep.id,
                index=0,
                prompt_ids=[1],
                output_ids=[2],
                metadata={"tool_calls": [{"id": "c", "name": "bash", "arguments": {"command": command}}]},
            )
        )

    with TrajectoryStore.open(tmp_path / "teacher") as store:
        passed, failed = Outcome.passed, Outcome.failed
        episode(store, "a", 0, passed, 1.0, "sort -u names.txt > out.txt")
        episode(store, "a", 1, passed, 1.0, "sort -u names.txt > out.txt")  # identical: a duplicate
        episode(
            store, "a", 2, passed, 1.0, "python3 -c 'import sys; print(sorted(set(open(\"names.txt\"))))' > out.txt"
        )
        episode(store, "a", 3, failed, 0.0, "cat names.txt > out.txt")
        episode(store, "a", 4, Outcome.sandbox_error, None, "")
        episode(store, "b", 0, passed, 1.0, "wc -l data.csv > count.txt")
        episode(store, "c", 0, failed, 0.0, "true")
        everything = select_teacher_episodes(store, SFTSettings())
        assert everything.kept == 4 and everything.dropped["below_min_reward"] == 2
        recipe = select_teacher_episodes(store, SFTSettings(dedup_similarity=0.9, max_per_task=1))
    assert recipe.kept_ids == ["a-0", "b-0"]
    assert recipe.dropped == {"infrastructure": 1, "below_min_reward": 2, "duplicate": 1, "over_cap": 1}
    assert (recipe.episodes, recipe.tasks, recipe.tasks_kept) == (7, 3, 2)
    assert "kept 2 on 2 of 3 tasks" in recipe.line()


def copy_tasks(root, names):
    for split, name in names:
        shutil.copytree(EXAMPLES / split / name, root / split / name)
    return root


def test_train_with_a_teacher_behind_an_api(docker_ready, tmp_path, tiny_model_dir):
    """`sft.teacher: openai:URL` through `openforge train`: 2 rollouts per task, near-identical ones dropped,
    samples re-rendered for the student, SFT trained, the report says what the recipe did."""
    tasks = copy_tasks(
        tmp_path / "tasks", [("train", "append-setting"), ("train", "backup-csv"), ("heldout", "append-db-setting")]
    )
    solutions = {}
    for name in ("append-setting", "backup-csv"):
        d = tasks / "train" / name
        command = [ln for ln in (d / "solution/solve.sh").read_text().splitlines() if ln and not ln.startswith("#")]
        solutions[(d / "instruction.md").read_text().strip()] = command[0]
    with teacher_server(solutions, tmp_path) as url:
        config = TrainConfig.model_validate(
            {
                "run": str(tmp_path / "run"),
                "model": str(tiny_model_dir),
                "tasks": {"dirs": [str(tasks)]},
                "harnesses": ["react"],
                "sandbox": "docker",
                "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
                "max_attempts": 1,
                "harness_options": {"react": {"max_steps": 2, "tools": ["bash"]}},
                "sft": {
                    "teacher": f"openai:{url}",
                    "rollouts_per_task": 2,
                    "dedup_similarity": 0.9,
                    "steps": 2,
                    "warmup_steps": 0,
                    "batch_size": 2,
                },
                "max_new_tokens": 96,
                "rl": {"steps": 0, "eval_instances": 1},  # the teacher is held to it too
            }
        )
        report = run_training(config)
    sft = report["sft"]
    assert sft["selection"]["episodes"] == 4 and sft["selection"]["kept"] == 2, sft
    assert sft["selection"]["dropped"]["duplicate"] == 2 and sft["rerendered"] == 2
    # react does not send the teacher's reasoning back, so its second call opens a segment of its own
    # (`reply_not_echoed`), as it would for the student: two samples per kept episode
    assert sft["samples"] == 4 and sft["steps"] == 2
    assert "re-rendered in the student's template" in (tmp_path / "run" / "report.md").read_text()
    with TrajectoryStore.open(tmp_path / "run" / "teacher") as store:
        calls = [c for e in store.list_episodes() for c in store.list_calls(e.id)]
    assert calls and all(c.output_ids == [] and "message_level" in c.metadata for c in calls)
    assert json.loads((tmp_path / "run" / "report.json").read_text())["sft"]["selection"]["tasks_kept"] == 2
