"""Small synthetic runs for the viewer's and the ATIF export's fast tests: episodes whose calls carry Chat
Completions request bodies as a harness would send them, token ids that continue each other as the proxy
records them, and the cases a viewer must show right (markup in a tool result, an image, a continuity break,
a parse error, a failed call, an infrastructure failure, flags, GRPO groups with and without signal).
No tests here."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

from openforge.core import CallRecord, Episode, EpisodeState, Outcome
from openforge.store import TrajectoryStore
from support.images import chat_image, png, recorded_images

SCREENSHOTS = [png(96, 64, seed=1), png(96, 64, seed=2)]  # the image episode's, real PNG files
MARKUP = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    }
]


def body(messages: list[dict], tools: bool = True) -> bytes:
    data = {"model": "tiny", "messages": messages}
    if tools:
        data["tools"] = TOOLS
    return json.dumps(data).encode()


def _ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(300, 900) for _ in range(n)]


def tool_call(call_id: str, command: str) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }


def add_episode(
    store: TrajectoryStore,
    rng: random.Random,
    *,
    task: str,
    harness: str = "react",
    sample: int = 0,
    step: int = 0,
    reward: float | None = 1.0,
    outcome: Outcome = Outcome.passed,
    reason: str | None = None,
    tool_result: str = "done",
    image: bool = False,
    break_reason: str | None = None,
    parse_error: str | None = None,
    call_error: bool = False,
    metadata: dict | None = None,
) -> Episode:
    """One episode of two calls (three with a break): a bash call, its result, a final answer."""
    episode = Episode(
        id=uuid.uuid4().hex,
        key=uuid.uuid4().hex,
        task=task,
        harness=harness,
        sample=sample,
        state=EpisodeState.ended,
        outcome=outcome,
        outcome_reason=reason,
        reward=reward,
        created_at=1_700_000_000.0 + rng.random() * 1000,
        metadata={
            "step": step,
            "final": True,
            "harness_version": "1.0",
            "task": {"id": task, "instruction": f"Do {task}."},
            **(metadata or {}),
        },
    )
    episode.ended_at = episode.created_at + 5.0
    store.create_episode(episode)
    user = {"role": "user", "content": f"Do {task}."}
    if image:
        user = {
            "role": "user",
            "content": [
                {"type": "text", "text": f"Do {task}. See the picture."},
                chat_image(SCREENSHOTS[0]),
            ],
        }
    system = {"role": "system", "content": "You are a shell agent."}
    first = [system, user]
    prompt0 = _ids(rng, 40)
    out0 = _ids(rng, 12)
    calls = [
        CallRecord(
            episode_id=episode.id,
            index=0,
            prompt_ids=prompt0,
            output_ids=out0,
            output_logprobs=[-rng.random() * 3 for _ in out0],
            policy_version=step,
            started_at=episode.created_at + 0.1,
            finished_at=episode.created_at + 0.5,
            timings={"total_s": 0.4},
            request_body=body(first),
            images=recorded_images("chat_completions", body(first)),
            parse_error=parse_error,
        )
    ]
    second = first + [
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_1", f"solve {task}")]},
        {"role": "tool", "tool_call_id": "call_1", "content": tool_result},
    ]
    if image:  # a screenshot after the tool ran, as a GUI harness sends one
        second.append(
            {"role": "user", "content": [{"type": "text", "text": "The screen now:"}, chat_image(SCREENSHOTS[1])]}
        )
    prompt1 = prompt0 + out0 + _ids(rng, 15)
    out1 = _ids(rng, 6)
    calls.append(
        CallRecord(
            episode_id=episode.id,
            index=1,
            prompt_ids=prompt1,
            output_ids=[] if call_error else out1,
            output_logprobs=[] if call_error else [-rng.random() for _ in out1],
            policy_version=step,
            started_at=episode.created_at + 1,
            finished_at=episode.created_at + 1.2,
            call_error="backend failed: boom" if call_error else None,
            finish_reason="error" if call_error else "stop",
            request_body=body(second),
            images=recorded_images("chat_completions", body(second)),
        )
    )
    if break_reason:
        rewritten = [system, {"role": "user", "content": f"Summary so far: {task} is solved. Answer."}]
        out2 = _ids(rng, 5)
        calls.append(
            CallRecord(
                episode_id=episode.id,
                index=2,
                prompt_ids=_ids(rng, 30),
                output_ids=out2,
                output_logprobs=[-0.1] * len(out2),
                policy_version=step,
                segment=1,
                break_reason=break_reason,
                started_at=episode.created_at + 2,
                request_body=body(rewritten),
            )
        )
    store.add_calls(calls)
    return episode


def make_run(run_dir: Path, seed: int = 0) -> dict[str, Episode]:
    """A run with named episodes for the tests to look at."""
    rng = random.Random(seed)
    named = {}
    with TrajectoryStore.open(run_dir) as store:
        store.set_run_info({"rollout": {"model": "tiny-model-not-here"}})
        named["markup"] = add_episode(
            store, rng, task="probe-markup", tool_result=MARKUP, reward=0.0, outcome=Outcome.failed
        )
        named["image"] = add_episode(store, rng, task="probe-image", image=True)
        named["break"] = add_episode(store, rng, task="probe-break", break_reason="history_rewritten")
        named["parse"] = add_episode(
            store, rng, task="probe-parse", parse_error="<tool_call> is not closed", reward=0.0, outcome=Outcome.failed
        )
        named["call_error"] = add_episode(
            store, rng, task="probe-error", call_error=True, reward=0.0, outcome=Outcome.failed
        )
        named["infra"] = add_episode(
            store, rng, task="probe-infra", reward=None, outcome=Outcome.sandbox_error, reason="the container died: OOM"
        )
        named["oom"] = add_episode(store, rng, task="probe-oom", metadata={"transcript": {"oom_killed": True}})
        # a GRPO group with signal (step 1, 1 pass 3 fails) and one without (step 1, all pass)
        for s, r in enumerate([1.0, 0.0, 0.0, 0.0]):
            named[f"signal-{s}"] = add_episode(
                store,
                rng,
                task="grp-signal",
                sample=s,
                step=1,
                reward=r,
                outcome=Outcome.passed if r else Outcome.failed,
            )
        for s in range(3):
            named[f"flat-{s}"] = add_episode(store, rng, task="grp-flat", sample=s, step=1)
        for s in range(2):
            named[f"claude-{s}"] = add_episode(
                store,
                rng,
                task="probe-markup",
                harness="claude-code",
                sample=s,
                reward=float(s),
                outcome=Outcome.passed if s else Outcome.failed,
            )
    return named
