"""The assembler (openforge/train/assemble.py) on recorded episodes.

- Real harnesses: Claude Code, Codex and OpenClaw run (concurrently) against the real proxy process with the
  scripted nonce policy; their recorded calls are assembled in both modes.
- Synthetic episodes through the in-process proxy and the official SDKs: compaction (history rewritten → a
  new segment) with a summary side call and a failed backend call; a sub-agent thread interleaved with the
  main one (each continues its own segment); an embedded tiny model (real, non-zero logprobs) with a weight
  swap in the middle of a segment.

Every assembly is checked the same way (`check_exact`): loss-mask runs sit exactly on the calls' outputs and
decode to the sampled text, everything else is prompt text, every sampled token is trained exactly once
across the samples, logprobs and per-token policy versions are aligned, `prompt_length` is the first trained
token; and `per-call` trains on the same tokens as `merged`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import pytest

from openforge.core import CallRecord, Episode, Outcome, Sample
from openforge.harness import LaunchContext, get_adapter
from openforge.harness.base import run_local
from openforge.harness.bundle import bundle_status, default_bundle_dir
from openforge.store import TrajectoryStore
from openforge.train import AssemblyMetrics, assemble, assemble_episode, assemble_run
from openforge.train.assemble import UNEXPECTED_BREAK, drop_reason, group_id
from support.paths import POLICIES
from support.proxy import in_process_proxy
from support.proxy_process import start_proxy

NONCE_POLICY = POLICIES / "nonce_harness.py"
INSTRUCTION = "Make a nonce, then save it to result.txt."
REAL_HARNESSES = ["claude-code", "codex", "openclaw"]
INFRASTRUCTURE_FAILURES = [o for o in Outcome if o.is_infrastructure_failure]

BASH = {
    "name": "bash",
    "description": "Run a command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
BASH_OAI = {
    "type": "function",
    "function": {"name": "bash", "description": "Run a command.", "parameters": BASH["input_schema"]},
}


# ---- the checks every assembly must pass ---------------------------------------------------------------


def graded(episode: Episode, reward: float = 1.0, **update) -> Episode:
    outcome = Outcome.passed if reward >= 1.0 else Outcome.failed
    return episode.model_copy(update={"reward": reward, "outcome": outcome, **update})


def usable(calls: list[CallRecord], include_side_calls: bool = False) -> list[CallRecord]:
    return [c for c in calls if c.call_error is None and (include_side_calls or not c.side_call)]


def mask_runs(mask: list[int]) -> list[tuple[int, int]]:
    """Contiguous [start, end) spans of 1s."""
    runs, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


def check_exact(samples: list[Sample], calls: list[CallRecord], decode, include_side_calls: bool = False) -> None:
    by_index = {(c.episode_id, c.index): c for c in calls}
    trained = Counter()
    for s in samples:
        Sample.model_validate(s.model_dump())  # token_ids, loss_mask, logprobs aligned
        assert len(s.policy_versions) == len(s.token_ids)
        sampled = [by_index[(s.episode_id, i)] for i in s.metadata["calls"]]
        sampled = [c for c in sampled if c.output_ids]
        last = sampled[-1]
        # the sequence is what the backend saw last: its last call's prompt + output
        assert s.token_ids == last.prompt_ids + last.output_ids
        # mask-1 runs are exactly the calls' outputs, where they were sampled, decoding to the sampled text
        runs = mask_runs(s.loss_mask)
        assert runs == [(len(c.prompt_ids), len(c.prompt_ids) + len(c.output_ids)) for c in sampled]
        for (start, end), call in zip(runs, sampled):
            assert s.token_ids[:start] == call.prompt_ids  # everything before a sampled output is its prompt
            assert s.token_ids[start:end] == call.output_ids
            assert decode(s.token_ids[start:end]) == decode(call.output_ids)
            assert s.logprobs[start:end] == (call.output_logprobs or [0.0] * (end - start))
            assert s.policy_versions[start:end] == [call.policy_version] * (end - start)
            trained[(call.episode_id, call.index)] += end - start
        masked_text = decode([t for t, m in zip(s.token_ids, s.loss_mask) if m])
        assert masked_text == "".join(decode(c.output_ids) for c in sampled)
        off = [i for i, m in enumerate(s.loss_mask) if not m]
        assert all(s.logprobs[i] == 0.0 and s.policy_versions[i] == -1 for i in off)
        assert s.prompt_length == runs[0][0]
    # every sampled token trained exactly once, across all samples
    expected = {(c.episode_id, c.index): len(c.output_ids) for c in usable(calls, include_side_calls) if c.output_ids}
    assert dict(trained) == expected


def token_counts(samples: list[Sample]) -> tuple[int, int]:
    return sum(sum(s.loss_mask) for s in samples), sum(len(s.token_ids) for s in samples)


def check_both_modes(episode: Episode, calls: list[CallRecord], decode, **kw) -> tuple[list[Sample], list[Sample]]:
    merged = assemble_episode(episode, calls, **kw)
    per_call = assemble_episode(episode, calls, mode="per-call", **kw)
    check_exact(merged, calls, decode, kw.get("include_side_calls", False))
    check_exact(per_call, calls, decode, kw.get("include_side_calls", False))
    assert len(per_call) == len([c for c in usable(calls, kw.get("include_side_calls", False)) if c.output_ids])
    assert all(len(s.metadata["calls"]) == 1 for s in per_call)
    (train_m, total_m), (train_p, total_p) = token_counts(merged), token_counts(per_call)
    assert train_m == train_p
    assert total_m <= total_p
    # the metrics report both modes whichever one was asked for, with the same figures
    _, metrics = assemble([(episode, calls)], mode="per-call", **kw)
    assert metrics.training_tokens == {"merged": train_m, "per-call": train_p}
    assert metrics.sequence_tokens == {"merged": total_m, "per-call": total_p}
    assert metrics.samples_by_mode == {"merged": len(merged), "per-call": len(per_call)}
    return merged, per_call


# ---- real harnesses through the real proxy ------------------------------------------------------------


def _bundle() -> Path:
    bundle = default_bundle_dir()
    missing = [h for h in REAL_HARNESSES if not bundle_status(bundle).get(h)]
    if missing:
        reason = f"harness bundle at {bundle} lacks {missing}: run `openforge harness install`"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return bundle


def _run_harness(proxy, bundle: Path, harness: str, root: Path) -> dict:
    adapter = get_adapter(harness)
    episode = proxy.new_episode(task="nonce", harness=harness)
    work, home = root / harness / "work", root / harness / "home"
    work.mkdir(parents=True)
    home.mkdir(parents=True)
    launch = adapter.launch(LaunchContext(bundle, home, work, proxy.url, episode["key"], "tiny", INSTRUCTION))
    # OpenClaw's start-up is mostly compiling JavaScript: a compile cache shared across runs halves it
    cache = {"NODE_COMPILE_CACHE": str(Path(tempfile.gettempdir()) / "openforge-test-node-compile-cache")}
    result = run_local(launch, adapter, timeout=240, extra_env=cache if harness == "openclaw" else None)
    assert result.returncode == 0 and not result.timed_out, (harness, result.stdout[-2000:], result.stderr[-2000:])
    proxy.end_episode(episode["episode_id"])
    return {"episode_id": episode["episode_id"], "nonce": (work / "nonce.txt").read_text().strip()}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tiny_model_dir):
    """One episode of each real harness, recorded concurrently through one proxy process."""
    bundle = _bundle()
    root = tmp_path_factory.mktemp("assemble-harnesses")
    proxy = start_proxy(root / "run", tiny_model_dir, f"scripted:{NONCE_POLICY}")
    try:
        with ThreadPoolExecutor(len(REAL_HARNESSES)) as pool:
            runs = dict(zip(REAL_HARNESSES, pool.map(lambda h: _run_harness(proxy, bundle, h, root), REAL_HARNESSES)))
    finally:
        proxy.stop()
    with TrajectoryStore.open(proxy.run) as store:
        for run in runs.values():
            run["episode"] = store.get_episode(run["episode_id"])
            run["calls"] = store.list_calls(run["episode_id"])
    return {"run_dir": proxy.run, **runs}


@pytest.mark.parametrize("harness", REAL_HARNESSES)
def test_real_harness_episode_masks_are_exact(recorded, harness, tiny_model):
    run = recorded[harness]
    episode, calls, nonce = graded(run["episode"]), run["calls"], run["nonce"]
    main = usable(calls)
    assert len(main) >= 3
    merged, per_call = check_both_modes(episode, calls, tiny_model.decode)
    segments = {c.segment for c in main}
    assert len(merged) == len(segments)  # one sample per continuity segment
    if harness == "openclaw":
        # OpenClaw moves its trailing context message on every call: each call opens a segment, and merging
        # cannot save anything
        assert len(segments) >= 3
        assert {c.break_reason for c in main[1:]} == {"context_message_moved"}
        assert token_counts(merged) == token_counts(per_call)
    else:
        (sample,) = merged
        assert sample.metadata["calls"] == [c.index for c in main]
        assert token_counts(merged)[1] < token_counts(per_call)[1]
        # what the model wrote is trained; the instruction and the tool's output (the nonce) are prompt text
        runs = mask_runs(sample.loss_mask)
        texts = [tiny_model.decode(sample.token_ids[a:b]) for a, b in runs]
        assert "tee nonce.txt" in texts[0] and f"echo {nonce} > result.txt" in texts[1]
        assert texts[-1].startswith("Done: the nonce is saved in result.txt.")
        first_gap = tiny_model.decode(sample.token_ids[runs[0][1] : runs[1][0]])
        assert nonce in first_gap  # the tool result, mask 0
        assert INSTRUCTION in tiny_model.decode(sample.token_ids[: sample.prompt_length])
    for s in merged + per_call:
        assert s.reward == 1.0 and s.group_id == "0|nonce|" + harness and s.episode_id == episode.id


def test_assemble_run_reads_the_store_and_reports_merges_and_breaks(recorded):
    episodes = [graded(recorded[h]["episode"], reward=1.0 if h != "codex" else 0.0) for h in REAL_HARNESSES]
    samples, metrics = assemble_run(recorded["run_dir"], episodes=episodes)
    all_calls = [c for h in REAL_HARNESSES for c in recorded[h]["calls"]]
    assert metrics.episodes_used == 3 and metrics.episodes_dropped == {}
    assert metrics.calls_total == len(all_calls)
    main = usable(all_calls)
    openclaw_main = usable(recorded["openclaw"]["calls"])
    assert metrics.calls_opening == 3
    assert metrics.calls_broken == {"context_message_moved": len(openclaw_main) - 1}
    assert metrics.calls_merged == len(main) - 3 - (len(openclaw_main) - 1)
    assert metrics.side_calls == metrics.side_calls_excluded == sum(c.side_call for c in all_calls)
    assert metrics.samples == len(samples) == metrics.samples_by_mode["merged"]
    assert (
        metrics.training_tokens["merged"] == metrics.training_tokens["per-call"] == sum(len(c.output_ids) for c in main)
    )
    assert metrics.sequence_tokens["merged"] < metrics.sequence_tokens["per-call"]
    assert metrics.token_saving > 1 and 0 < metrics.merge_rate < 1
    assert AssemblyMetrics.model_validate_json(metrics.model_dump_json()) == metrics
    assert {s.reward for s in samples if s.metadata["harness"] == "codex"} == {0.0}

    # an infrastructure failure is dropped whole, by outcome; a retried attempt is left out as not final
    episodes[2] = episodes[2].model_copy(update={"outcome": Outcome.timeout})
    episodes[1] = episodes[1].model_copy(update={"metadata": {**episodes[1].metadata, "final": False}})
    samples, metrics = assemble_run(recorded["run_dir"], episodes=episodes, mode="per-call")
    assert {s.metadata["harness"] for s in samples} == {"claude-code"}
    assert metrics.episodes_used == 1 and metrics.episodes_dropped == {"timeout": 1, "not_final": 1}
    assert metrics.calls_in_dropped_episodes == len(recorded["codex"]["calls"]) + len(recorded["openclaw"]["calls"])
    # as stored (never graded: no outcome, so not final; and no reward), nothing is trained on
    samples, metrics = assemble_run(recorded["run_dir"])
    assert samples == [] and metrics.episodes_dropped == {"not_final": 3}
    samples, metrics = assemble_run(recorded["run_dir"], final_only=False)
    assert samples == [] and metrics.episodes_dropped == {"no_reward": 3}


# ---- synthetic episodes through the in-process proxy ----------------------------------------------------


class Thread:
    """Plays a harness's conversation with the Anthropic SDK: echoes each reply back as received and answers
    its tool calls."""

    def __init__(self, client: anthropic.AsyncAnthropic, system: str, first: str):
        self.client, self.system = client, system
        self.messages = [{"role": "user", "content": first}]

    async def call(self, tools=True) -> anthropic.types.Message:
        kwargs = {"tools": [BASH]} if tools else {}
        reply = await self.client.messages.create(
            model="m", max_tokens=1000, system=self.system, messages=self.messages, **kwargs
        )
        if tools:
            self.messages.append(
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
            )
            uses = [b for b in reply.content if b.type == "tool_use"]
            if uses:
                self.messages.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": u.id, "content": f"result of {u.input['command']}"}
                            for u in uses
                        ],
                    }
                )
        return reply

    def say(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})


async def _compaction_episode(proxy) -> tuple[str, list[CallRecord]]:
    """Four calls, a summary side call, compaction (history replaced by the summary), a failed backend call
    and its retry, one more call."""
    episode_id, key = await proxy.new_episode(task="compact", harness="synthetic")
    main = Thread(proxy.anthropic(key), "You are an agent.", "List the files, twice.")
    await main.call()  # tool call
    await main.call()  # answer quoting the tool result
    main.say("Once more.")
    await main.call()
    await main.call()
    summary = Thread(main.client, "You are an agent.", "")
    summary.messages = main.messages + [{"role": "user", "content": "Summarize the conversation."}]
    await summary.call(tools=False)  # no tools: a side call
    main.messages = [{"role": "user", "content": "Summary of the earlier work: listed the files twice. Go on."}]
    generate = proxy.service.backend.generate

    async def broken(*a, **k):
        from openforge.inference import BackendError

        proxy.service.backend.generate = generate  # fail once
        raise BackendError("backend on fire")

    proxy.service.backend.generate = broken
    with pytest.raises(anthropic.APIStatusError):
        await main.call()
    await main.call()  # the retry: tool call after compaction
    await main.call()
    return episode_id, proxy.store.list_calls(episode_id)


async def test_compaction_side_calls_and_failed_calls(tmp_path, tiny_model_dir, tiny_model):
    async with in_process_proxy(tmp_path / "run", tiny_model_dir) as proxy:
        episode_id, calls = await _compaction_episode(proxy)
        episode = graded(proxy.store.get_episode(episode_id), reward=0.5, metadata={"step": 4})
    assert [(c.side_call, c.call_error is not None, c.break_reason) for c in calls] == [
        (False, False, None),
        (False, False, None),
        (False, False, None),
        (False, False, None),
        (True, False, "side_call"),
        (False, True, "history_rewritten"),
        (False, False, "history_rewritten"),
        (False, False, None),
    ]
    merged, per_call = check_both_modes(episode, calls, tiny_model.decode)
    assert [s.metadata["calls"] for s in merged] == [[0, 1, 2, 3], [6, 7]]
    assert [s.metadata["opened_by"] for s in merged] == [None, "history_rewritten"]
    assert [s.metadata["calls"] for s in per_call] == [[0], [1], [2], [3], [6], [7]]
    # what was sampled before compaction is trained in the first sample only; the summary is prompt text
    assert "Summary of the earlier work" in tiny_model.decode(merged[1].token_ids[: merged[1].prompt_length])
    assert all(s.reward == 0.5 and s.group_id == "4|compact|synthetic" for s in merged + per_call)
    assert {s.group_id for s in assemble_episode(episode, calls, step=9)} == {"9|compact|synthetic"}

    # side calls on request: a sample of their own, in both modes
    merged_side, per_call_side = check_both_modes(episode, calls, tiny_model.decode, include_side_calls=True)
    assert [s.metadata["calls"] for s in merged_side] == [[0, 1, 2, 3], [4], [6, 7]]
    assert merged_side[1].metadata["side_call"] and tiny_model.decode(merged_side[1].token_ids).count("Summarize") == 1
    assert len(per_call_side) == 7

    _, metrics = assemble([(episode, calls)])
    assert (metrics.calls_merged, metrics.calls_opening, metrics.calls_broken) == (4, 1, {"history_rewritten": 1})
    assert (metrics.side_calls, metrics.side_calls_excluded, metrics.calls_errored) == (1, 1, 1)


async def test_sub_agent_threads_each_continue_their_segment(tmp_path, tiny_model_dir, tiny_model):
    async with in_process_proxy(tmp_path / "run", tiny_model_dir) as proxy:
        episode_id, key = await proxy.new_episode(task="explore", harness="synthetic")
        client = proxy.anthropic(key)
        main = Thread(client, "You are the main agent.", "Find the config file.")
        sub = Thread(client, "You are a sub-agent that searches files.", "Search for *.toml files.")
        # main, sub, sub, main, sub, main: the threads interleave, as Claude Code's Task tool does
        for thread in (main, sub, sub, main):
            await thread.call()
        sub.say("Also *.yaml.")
        await sub.call()
        main.say("Check it.")
        await main.call()
        calls = proxy.store.list_calls(episode_id)
        episode = graded(proxy.store.get_episode(episode_id))
    assert [c.segment for c in calls] == [0, 1, 1, 0, 1, 0]
    assert [c.break_reason for c in calls] == [None, "sub_agent", None, None, None, None]
    merged, per_call = check_both_modes(episode, calls, tiny_model.decode)
    assert [s.metadata["calls"] for s in merged] == [[0, 3, 5], [1, 2, 4]]
    assert [s.segment for s in merged] == [0, 1]
    assert "sub-agent" not in tiny_model.decode(merged[0].token_ids)
    assert "main agent" not in tiny_model.decode(merged[1].token_ids)
    assert token_counts(merged)[1] < token_counts(per_call)[1]
    _, metrics = assemble([(episode, calls)])
    assert (metrics.calls_merged, metrics.calls_opening, metrics.calls_broken) == (4, 1, {"sub_agent": 1})


async def test_unexpected_break_starts_a_new_sample_and_is_counted(tmp_path, tiny_model_dir, tiny_model):
    async with in_process_proxy(tmp_path / "run", tiny_model_dir) as proxy:
        episode_id, calls = await _compaction_episode(proxy)
        episode = graded(proxy.store.get_episode(episode_id))
    # call 2 claims segment 0 but its prompt does not extend call 1 (one token of call 1's output differs)
    c1 = calls[1]
    tampered = list(calls[2].prompt_ids)
    tampered[len(c1.prompt_ids)] += 1
    calls[2] = calls[2].model_copy(update={"prompt_ids": tampered})
    calls[3] = calls[3].model_copy(
        update={
            "prompt_ids": tampered
            + calls[2].output_ids
            + calls[3].prompt_ids[len(tampered) + len(calls[2].output_ids) :]
        }
    )
    merged = assemble_episode(episode, calls)
    assert [s.metadata["calls"] for s in merged] == [[0, 1], [2, 3], [6, 7]]
    assert merged[1].metadata["opened_by"] == UNEXPECTED_BREAK
    check_exact(merged, calls, tiny_model.decode)  # still exact: each sampled token trained once
    _, metrics = assemble([(episode, calls)])
    assert metrics.calls_broken == {"history_rewritten": 1, UNEXPECTED_BREAK: 1} and metrics.calls_merged == 3


def test_infrastructure_failures_and_ungraded_episodes_are_dropped_whole():
    calls = [CallRecord(episode_id="e", index=0, prompt_ids=[1, 2], output_ids=[3, 4], output_logprobs=[-0.5, -0.25])]
    base = Episode(id="e", key="k", task="t", harness="h")
    assert assemble_episode(base, calls) == [] and drop_reason(base) == "no_reward"
    for outcome in INFRASTRUCTURE_FAILURES:
        failed = base.model_copy(update={"outcome": outcome, "reward": 0.0})
        assert assemble_episode(failed, calls) == [] and drop_reason(failed) == outcome.value
    ok = base.model_copy(update={"outcome": Outcome.failed, "reward": 0.0})
    (sample,) = assemble_episode(ok, calls)
    assert (sample.token_ids, sample.loss_mask, sample.logprobs, sample.policy_versions, sample.prompt_length) == (
        [1, 2, 3, 4],
        [0, 0, 1, 1],
        [0.0, 0.0, -0.5, -0.25],
        [-1, -1, 0, 0],
        2,
    )
    pairs = [(base.model_copy(update={"outcome": o, "reward": 0.0}), calls) for o in INFRASTRUCTURE_FAILURES]
    samples, metrics = assemble(pairs + [(ok, calls), (base, calls)])
    assert len(samples) == 1 and metrics.episodes_used == 1
    # `base` has no outcome yet: not final (openforge.store.final), whatever else it lacks
    assert metrics.episodes_dropped == {**{o.value: 1 for o in INFRASTRUCTURE_FAILURES}, "not_final": 1}
    _, metrics = assemble(pairs + [(ok, calls), (base, calls)], final_only=False)
    assert metrics.episodes_dropped == {**{o.value: 1 for o in INFRASTRUCTURE_FAILURES}, "no_reward": 1}
    assert group_id(ok) == "0|t|h" and group_id(ok.model_copy(update={"metadata": {"step": 2}})) == "2|t|h"
    with pytest.raises(ValueError):
        assemble_episode(ok, calls, mode="both")


async def test_embedded_logprobs_are_aligned_with_a_forward_pass_across_a_weight_swap(
    tmp_path, tiny_model_dir, tiny_model
):
    """Real logprobs: each trained position of the merged sample holds the log-probability that the policy
    version which sampled it gives that token in the merged sequence (causal model + exact prefix)."""
    import torch
    from safetensors.torch import load_file, save_file

    new_dir = tmp_path / "new-weights"
    shutil.copytree(tiny_model_dir, new_dir)
    weights = load_file(new_dir / "model.safetensors")
    torch.manual_seed(0)
    save_file(
        {k: v + 0.05 * torch.randn_like(v) for k, v in weights.items()},
        new_dir / "model.safetensors",
        metadata={"format": "pt"},
    )
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend="embedded", max_new_tokens=6) as proxy:
        episode_id, key = await proxy.new_episode(task="lp", harness="synthetic")
        client = proxy.openai(key)
        messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
        for turn in range(4):
            if turn == 2:  # new weights in the middle of the segment
                async with proxy.admin() as admin:
                    await admin.post("/admin/pause")
                    assert (await admin.post("/admin/weights", json={"path": str(new_dir)})).json() == {
                        "policy_version": 1
                    }
                    await admin.post("/admin/resume")
            r = await client.chat.completions.create(
                model="m", messages=messages, tools=[BASH_OAI], temperature=1.0, seed=turn
            )
            messages += [
                r.choices[0].message.model_dump(exclude_none=True),
                {"role": "user", "content": f"next {turn}"},
            ]
        calls = proxy.store.list_calls(episode_id)
        episode = graded(proxy.store.get_episode(episode_id))
    assert [c.policy_version for c in calls] == [0, 0, 1, 1] and {c.segment for c in calls} == {0}
    merged, _ = check_both_modes(episode, calls, tiny_model.decode)
    (sample,) = merged
    trained = [i for i, m in enumerate(sample.loss_mask) if m]
    assert all(sample.logprobs[i] < 0 for i in trained)
    assert {sample.policy_versions[i] for i in trained} == {0, 1}

    ids = torch.tensor([sample.token_ids])
    for version, model_dir in ((0, tiny_model_dir), (1, new_dir)):
        from openforge.models import ModelDir

        model = ModelDir(model_dir).load_model(dtype=torch.float32)
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
        for i in (i for i in trained if sample.policy_versions[i] == version):
            assert abs(float(logp[i - 1, sample.token_ids[i]]) - sample.logprobs[i]) < 1e-3, (version, i)
