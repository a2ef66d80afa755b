"""Trajectory store: round trips, prefix-shared prompts, schema migrations, group commit, exports.

Real SQLite files under tmp_path; no mocks. Process-level durability and concurrency live in
test_store_concurrency.py.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from openforge.core import CallRecord, Episode, EpisodeState, FinishReason, Outcome, Sample, SamplingParams
from openforge.store import (
    SCHEMA_VERSION,
    AsyncCallWriter,
    DuplicateCallError,
    DuplicateEpisodeError,
    EpisodeNotFoundError,
    SchemaVersionError,
    StoreClosedError,
    TrajectoryStore,
    export_calls,
)
from openforge.store import schema as store_schema
from openforge.store.prompts import MAX_CHAIN_DEPTH


def f32(values: list[float]) -> list[float]:
    """What a logprob list reads back as: each value rounded to float32."""
    return np.asarray(values, dtype=np.float32).astype(float).tolist()


def as_read_back(record: CallRecord) -> CallRecord:
    return record.model_copy(update={"output_logprobs": f32(record.output_logprobs)})


def full_episode(episode_id: str = "ep-1", key: str = "sk-secret-1", **overrides) -> Episode:
    fields = dict(
        id=episode_id,
        key=key,
        task="fix-the-bug",
        harness="claude-code",
        attempt=2,
        sample=5,
        state=EpisodeState.ended,
        outcome=Outcome.timeout,
        outcome_reason="sandbox wall clock 600 s",
        reward=0.25,
        created_at=1_700_000_000.123456,
        ended_at=1_700_000_600.654321,
        metadata={"group": "step-3/fix-the-bug/claude-code", "nested": {"ü": [1, 2.5, None, True]}},
    )
    fields.update(overrides)
    return Episode(**fields)


def full_call(episode_id: str = "ep-1", index: int = 0, prompt_ids: list[int] | None = None, **overrides) -> CallRecord:
    rng = np.random.default_rng(index)
    output = rng.integers(0, 151_000, size=37).tolist()
    fields = dict(
        episode_id=episode_id,
        index=index,
        prompt_ids=prompt_ids if prompt_ids is not None else rng.integers(0, 151_000, size=300).tolist(),
        output_ids=output,
        output_logprobs=(-rng.exponential(size=37)).tolist(),
        sampling=SamplingParams(
            temperature=0.7,
            top_p=0.95,
            top_k=40,
            max_tokens=512,
            stop=["</s>", "Ω"],
            stop_token_ids=[2, 151645],
            seed=7,
        ),
        finish_reason=FinishReason.length,
        policy_version=3,
        started_at=1_700_000_001.5,
        finished_at=1_700_000_002.25,
        timings={"queue_s": 0.001, "prefill_s": 0.5, "decode_s": 1.25},
        dialect="anthropic_messages",
        side_call=True,
        segment=2,
        break_reason="history rewritten at message 4",
        call_error=None,
        parse_error="unterminated <tool_call>",
        request_body=bytes(range(256)) * 4 + rng.bytes(10_000) + b'{"a": 1}' * 500,
        response_body=b"event: message_stop\ndata: {}\n\n\x00\xff",
        metadata={"request_id": "req_01", "ids": [1, 2, 3]},
    )
    fields.update(overrides)
    return CallRecord(**fields)


@pytest.fixture
def store(tmp_path):
    with TrajectoryStore.open(tmp_path / "run") as s:
        yield s


# ---- opening ------------------------------------------------------------------------------------------


def test_open_creates_wal_database_at_current_schema(tmp_path):
    run_dir = tmp_path / "new" / "run"
    with TrajectoryStore.open(run_dir) as store:
        assert store.path == run_dir / "trajectories.db"
        conn = store._conn()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert store.created_at > 0
    # Reopening keeps created_at and the schema.
    with TrajectoryStore.open(run_dir) as again:
        assert again._conn().execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_closed_store_refuses_use(tmp_path):
    store = TrajectoryStore.open(tmp_path)
    store.close()
    with pytest.raises(StoreClosedError):
        store.count_calls()


def test_store_import_pulls_neither_torch_nor_pyarrow():
    code = "import sys, openforge.store; print('torch' in sys.modules, 'pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ---- run info and episodes ----------------------------------------------------------------------------


def test_run_info_merges_keys(store):
    assert store.get_run_info() == {}
    store.set_run_info({"config": {"model": "tiny", "lr": 1e-5}, "seed": 1})
    store.set_run_info({"seed": 2, "note": "ünïcode"})
    assert store.get_run_info() == {"config": {"model": "tiny", "lr": 1e-5}, "seed": 2, "note": "ünïcode"}


def test_episode_round_trip_every_field(store):
    episode = full_episode()
    store.create_episode(episode)
    assert store.get_episode(episode.id) == episode
    assert store.get_episode_by_key(episode.key) == episode
    minimal = Episode(id="ep-min", key="sk-min")
    store.create_episode(minimal)
    assert store.get_episode("ep-min") == minimal
    assert store.get_episode("nope") is None
    assert store.get_episode_by_key("nope") is None


def test_episode_key_is_unique_and_indexed(store):
    store.create_episode(full_episode("a", "sk-a"))
    with pytest.raises(DuplicateEpisodeError, match="id 'a'"):
        store.create_episode(full_episode("a", "sk-other"))
    with pytest.raises(DuplicateEpisodeError, match="key") as err:
        store.create_episode(full_episode("b", "sk-a"))
    assert "sk-a" not in str(err.value)  # the key is a secret: never echoed
    plan = store._conn().execute("EXPLAIN QUERY PLAN SELECT * FROM episodes WHERE key = ?", ("x",)).fetchall()
    assert any("USING INDEX" in row[-1] for row in plan)


def test_update_episode(store):
    store.create_episode(Episode(id="e", key="k", task="t"))
    updated = store.update_episode(
        "e", state="ended", outcome=Outcome.passed, outcome_reason="tests passed", reward=1.0, ended_at=5.5,
        metadata={"x": 1},
    )  # fmt: skip
    assert store.get_episode("e") == updated
    assert updated.state is EpisodeState.ended and updated.outcome is Outcome.passed and updated.reward == 1.0
    assert updated.task == "t"
    with pytest.raises(ValueError, match="cannot update episode field"):
        store.update_episode("e", key="new")
    with pytest.raises(ValidationError):
        store.update_episode("e", state="exploded")
    with pytest.raises(EpisodeNotFoundError):
        store.update_episode("missing", reward=0.0)
    assert store.get_episode("e") == updated  # failed updates changed nothing


def test_list_episodes_filters_and_order(store):
    for i in range(6):
        store.create_episode(
            Episode(
                id=f"e{i}", key=f"k{i}", task=f"t{i % 2}", harness="codex" if i < 3 else "claude", created_at=100 - i
            )
        )
    store.update_episode("e1", state=EpisodeState.ended, outcome=Outcome.failed)
    assert [e.id for e in store.list_episodes()] == ["e5", "e4", "e3", "e2", "e1", "e0"]
    assert [e.id for e in store.list_episodes(task="t0")] == ["e4", "e2", "e0"]
    assert [e.id for e in store.list_episodes(task="t1", harness="codex")] == ["e1"]
    assert [e.id for e in store.list_episodes(state="ended")] == ["e1"]
    assert [e.id for e in store.list_episodes(outcome=Outcome.failed)] == ["e1"]
    assert len(store.list_episodes(limit=2)) == 2
    assert store.count_episodes() == 6


def test_verifier_result_sets_reward(store):
    store.create_episode(Episode(id="e", key="k"))
    store.record_verifier_result("e", 0.5, {"tests_passed": 3, "tests_total": 6})
    assert store.get_episode("e").reward == 0.5
    result = store.get_verifier_result("e")
    assert result["reward"] == 0.5 and result["details"] == {"tests_passed": 3, "tests_total": 6}
    assert store.get_verifier_result("other") is None
    with pytest.raises(EpisodeNotFoundError):
        store.record_verifier_result("other", 1.0, {})


def test_sample_json_round_trip():
    # Samples are derived from calls (assembly is a pure function), so the store does not keep them.
    sample = Sample(
        token_ids=[1, 2, 3], loss_mask=[0, 1, 1], logprobs=[0.0, -0.5, -1.25], reward=1.0, group_id="g",
        episode_id="e", segment=1, prompt_length=1, policy_versions=[3, 3], metadata={"k": "v"},
    )  # fmt: skip
    assert Sample.model_validate_json(sample.model_dump_json()) == sample


# ---- calls --------------------------------------------------------------------------------------------


def test_call_round_trip_every_field(store, tmp_path):
    store.create_episode(full_episode())
    record = full_call()
    store.add_call(record)
    expected = as_read_back(record)
    assert store.get_call("ep-1", 0) == expected
    assert store.list_calls("ep-1") == [expected]
    # A fresh process-like reader (new store, cold caches) sees the same.
    with TrajectoryStore.open(tmp_path / "run") as other:
        assert other.get_call("ep-1", 0) == expected


def test_minimal_call_round_trip(store):
    store.create_episode(Episode(id="e", key="k"))
    record = CallRecord(episode_id="e", index=0, prompt_ids=[])
    store.add_call(record)
    assert store.get_call("e", 0) == record


def test_logprobs_are_stored_as_float32(store):
    store.create_episode(Episode(id="e", key="k"))
    store.add_call(
        CallRecord(episode_id="e", index=0, prompt_ids=[1], output_ids=[5, 6], output_logprobs=[-0.1, -1e-9])
    )
    got = store.get_call("e", 0).output_logprobs
    assert got == [float(np.float32(-0.1)), float(np.float32(-1e-9))]
    assert got != [-0.1, -1e-9]


def test_call_errors(store):
    store.create_episode(Episode(id="e", key="k"))
    store.add_call(full_call("e", 0))
    with pytest.raises(DuplicateCallError, match="call 0 of episode 'e'"):
        store.add_call(full_call("e", 0))
    with pytest.raises(EpisodeNotFoundError, match="'ghost'"):
        store.add_call(full_call("ghost", 0))
    with pytest.raises(ValueError, match="int32"):
        store.add_call(full_call("e", 1, prompt_ids=[2**31]))
    # A failed batch stores nothing.
    with pytest.raises(DuplicateCallError):
        store.add_calls([full_call("e", 5), full_call("e", 0)])
    assert store.get_call("e", 5) is None
    assert store.count_calls() == 1


def test_listing_orders_and_counts(store):
    for ep in ("b", "a"):
        store.create_episode(Episode(id=ep, key=f"k-{ep}", created_at={"b": 1.0, "a": 2.0}[ep]))
    for index in (3, 0, 2, 1):  # written out of order
        store.add_call(full_call("a", index))
    store.add_call(full_call("b", 0))
    assert [c.index for c in store.list_calls("a")] == [0, 1, 2, 3]
    assert [(c.episode_id, c.index) for c in store.iter_calls()] == [("b", 0)] + [("a", i) for i in range(4)]
    assert store.count_calls() == 5 and store.count_calls("a") == 4 and store.count_calls("none") == 0
    assert store.get_call("a", 9) is None
    assert store.list_calls("none") == []


def test_threads_share_one_store(store):
    store.create_episode(Episode(id="e", key="k"))
    errors = []

    def write(worker: int) -> None:
        try:
            for i in range(40):
                store.add_call(full_call("e", worker * 1000 + i, prompt_ids=[worker] * 50 + [i]))
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.count_calls("e") == 240
    assert store.get_call("e", 5039).prompt_ids == [5] * 50 + [39]


# ---- prefix-shared prompts ----------------------------------------------------------------------------


def _stored_prompt_layout(store, episode_id):
    return (
        store._conn()
        .execute(
            "SELECT call_index, prompt_ref, prompt_prefix_len, prompt_depth, prompt_len FROM calls "
            "WHERE episode_id = ? ORDER BY call_index",
            (episode_id,),
        )
        .fetchall()
    )


def _write_episode(store, episode_id, prompts, outputs, one_batch=False):
    """Write the calls one by one, or all in one `add_calls` batch (references then point inside it)."""
    store.create_episode(Episode(id=episode_id, key=f"key-{episode_id}"))
    records = [
        CallRecord(episode_id=episode_id, index=i, prompt_ids=prompt, output_ids=output)
        for i, (prompt, output) in enumerate(zip(prompts, outputs))
    ]
    if one_batch:
        store.add_calls(records)
    else:
        for record in records:
            store.add_call(record)
    return records


def _assert_reads_back(store, run_dir, episode_id, records):
    assert store.list_calls(episode_id) == records
    with TrajectoryStore.open(run_dir) as cold:  # no cached sequences: every prompt rebuilt from the file
        assert cold.get_call(episode_id, len(records) - 1) == records[-1]
        assert cold.list_calls(episode_id) == records


def test_extending_prompts_are_stored_as_references(tmp_path):
    rng = np.random.default_rng(0)
    prompts, outputs = [rng.integers(0, 150_000, 2000).tolist()], []
    for _ in range(8):
        outputs.append(rng.integers(0, 150_000, 100).tolist())
        prompts.append(prompts[-1] + outputs[-1] + rng.integers(0, 150_000, 300).tolist())
    outputs.append([1, 2, 3])
    with TrajectoryStore.open(tmp_path) as store:
        records = _write_episode(store, "e", prompts, outputs)
        layout = _stored_prompt_layout(store, "e")
        assert layout[0][1] is None
        for index, ref, prefix_len, depth, _length in layout[1:]:
            assert ref == index - 1 and prefix_len == len(prompts[index - 1]) + 100 and depth == index
        tails = store._conn().execute("SELECT sum(length(prompt_tail)) FROM calls").fetchone()[0]
        assert tails < 4 * (2000 + 8 * 400) + 100  # ~ the unique tokens, not the sum of all prompts
        _assert_reads_back(store, tmp_path, "e", records)


def test_continuity_breaks_reconstruct_exactly(tmp_path):
    base = list(range(1000, 1500))
    out = [[7] * 20 for _ in range(8)]
    prompts = [
        base,  # 0
        base + out[0] + [1, 2, 3],  # 1 extends 0
        list(range(90_000, 90_300)),  # 2 side call: unrelated prompt
        base + out[0] + [1, 2, 3] + out[1] + [4],  # 3 extends 1, skipping the side call
        base[:200] + [5] * 50 + base[250:],  # 4 history rewritten in the middle (a break)
        base[:100],  # 5 shorter than anything before
        base[:100],  # 6 identical to 5 (a retry)
        [],  # 7 empty prompt
    ]
    with TrajectoryStore.open(tmp_path) as store:
        records = _write_episode(store, "e", prompts, out)
        batched = _write_episode(store, "batched", prompts, out, one_batch=True)
        layout = {row[0]: row for row in _stored_prompt_layout(store, "e")}
        assert _stored_prompt_layout(store, "batched") == list(layout.values())
        assert layout[2][1] is None  # nothing shared: stored whole
        assert layout[3][1] == 1  # found past the side call
        assert layout[4][2] == 200  # shares the prefix up to the rewrite
        _assert_reads_back(store, tmp_path, "e", records)
        _assert_reads_back(store, tmp_path, "batched", batched)


def test_reference_chains_are_capped(tmp_path):
    prompts, outputs = [list(range(100))], []
    for i in range(MAX_CHAIN_DEPTH + 6):
        outputs.append([i])
        prompts.append(prompts[-1] + [i, 9])
    outputs.append([0])
    with TrajectoryStore.open(tmp_path) as store:
        records = _write_episode(store, "e", prompts, outputs)
        depths = [row[3] for row in _stored_prompt_layout(store, "e")]
        assert max(depths) == MAX_CHAIN_DEPTH
        assert 0 in depths[MAX_CHAIN_DEPTH + 1 :]  # a whole prompt again once every candidate is too deep
        _assert_reads_back(store, tmp_path, "e", records)


_token = st.integers(0, 2**31 - 1)


@st.composite
def _prompt_sequences(draw):
    """Prompts built the way harnesses build them: mostly extend, sometimes rewrite, cut or start over."""
    prompts, outputs = [draw(st.lists(_token, max_size=40))], []
    for _ in range(draw(st.integers(0, 8))):
        outputs.append(draw(st.lists(_token, max_size=20)))
        previous = prompts[-1] + outputs[-1]
        op = draw(st.sampled_from(["extend", "extend", "rewrite", "cut", "fresh"]))
        if op == "extend":
            prompts.append(previous + draw(st.lists(_token, max_size=30)))
        elif op == "rewrite" and previous:
            at = draw(st.integers(0, len(previous) - 1))
            prompts.append(previous[:at] + draw(st.lists(_token, min_size=1, max_size=5)) + previous[at + 1 :])
        elif op == "cut":
            prompts.append(previous[: draw(st.integers(0, len(previous)))])
        else:
            prompts.append(draw(st.lists(_token, max_size=40)))
    outputs.append(draw(st.lists(_token, max_size=20)))
    return prompts, outputs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_prompt_sequences(), st.booleans())
def test_any_prompt_sequence_reconstructs_exactly(data, one_batch):
    prompts, outputs = data
    with tempfile.TemporaryDirectory() as run_dir, TrajectoryStore.open(run_dir) as store:
        records = _write_episode(store, "e", prompts, outputs, one_batch)
        _assert_reads_back(store, run_dir, "e", records)


# ---- schema -------------------------------------------------------------------------------------------


def test_migrations_are_ordered():
    versions = [m.version for m in store_schema.MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))
    assert SCHEMA_VERSION == versions[-1] >= 2


def test_migrates_a_version_1_database(tmp_path):
    path = tmp_path / "trajectories.db"
    conn = sqlite3.connect(path, isolation_level=None)
    store_schema.migrate(conn, str(path), target=1)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.execute(
        "INSERT INTO episodes (id, key, attempt, sample, state, created_at, metadata) "
        "VALUES ('old', 'k-old', 0, 0, 'created', 1.0, '{}')"
    )
    conn.close()
    with TrajectoryStore.open(tmp_path) as store:
        assert store._conn().execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert store.get_episode_by_key("k-old") == Episode(id="old", key="k-old", created_at=1.0)
        store.record_verifier_result("old", 1.0, {"from": "v2 table"})  # the table v2 added
        assert store.get_verifier_result("old")["details"] == {"from": "v2 table"}


def test_refuses_a_newer_database_untouched(tmp_path):
    path = tmp_path / "trajectories.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    newer = f"schema version {SCHEMA_VERSION + 1}.*at most version {SCHEMA_VERSION}"
    with pytest.raises(SchemaVersionError, match=newer):
        TrajectoryStore.open(tmp_path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    conn.close()


# ---- group commit -------------------------------------------------------------------------------------


async def test_async_writer_batches_concurrent_callers(tmp_path):
    store = TrajectoryStore.open(tmp_path)
    observer = TrajectoryStore.open(tmp_path)  # separate connections: sees only committed data
    episodes = [f"e{i}" for i in range(20)]
    for ep in episodes:
        store.create_episode(Episode(id=ep, key=f"k-{ep}"))
    rng = np.random.default_rng(1)
    prompts = {ep: rng.integers(0, 150_000, 500).tolist() for ep in episodes}
    records = {}
    visible_after_await = []

    async def episode_worker(ep: str) -> None:
        prompt = prompts[ep]
        for index in range(10):
            output = rng.integers(0, 150_000, 30).tolist()
            record = CallRecord(
                episode_id=ep, index=index, prompt_ids=prompt, output_ids=output, output_logprobs=[-0.5] * 30
            )
            records[(ep, index)] = record
            await writer.add_call(record)
            visible_after_await.append(observer.get_call(ep, index) is not None)
            prompt = prompt + output + [index]
            await asyncio.sleep(0)

    async with AsyncCallWriter(store) as writer:
        await asyncio.gather(*(episode_worker(ep) for ep in episodes))
        stats = writer.stats
    assert all(visible_after_await) and len(visible_after_await) == 200
    assert stats.records == 200 and stats.transactions < 200 and stats.largest_batch > 1
    for (ep, index), record in records.items():
        assert store.get_call(ep, index) == as_read_back(record)
    # Prompts written in one batch still reference each other.
    refs = store._conn().execute("SELECT count(*) FROM calls WHERE prompt_ref IS NOT NULL").fetchone()[0]
    assert refs == 180
    with pytest.raises(StoreClosedError):
        await writer.add_call(records[("e0", 0)])
    observer.close()
    store.close()


async def test_async_writer_commits_a_lone_call_on_the_callers_thread_unless_the_lock_is_taken(tmp_path):
    """With one call in flight (`alone`), a small record is committed by the caller itself (no hop to the
    writer thread and back); when another connection holds SQLite's write lock it does not wait on the loop
    for it, but queues the record, which the writer commits once the lock is free."""
    store = TrajectoryStore.open(tmp_path)
    store.create_episode(Episode(id="e", key="k"))
    committed_on: list[str] = []
    real_try = store.try_add_call

    def spy(record):
        done = real_try(record)
        committed_on.append(threading.current_thread().name if done else "refused")
        return done

    store.try_add_call = spy
    holder = sqlite3.connect(str(tmp_path / "trajectories.db"), isolation_level=None)
    async with AsyncCallWriter(store) as writer:
        await writer.add_call(full_call("e", 0), alone=True)
        assert committed_on == [threading.current_thread().name] and store.get_call("e", 0) is not None
        await writer.add_call(full_call("e", 1))  # not alone: the writer's batch
        assert committed_on == [threading.current_thread().name]

        holder.execute("BEGIN IMMEDIATE")
        pending = asyncio.ensure_future(writer.add_call(full_call("e", 2), alone=True))
        started = time.monotonic()
        await asyncio.sleep(0.2)
        assert time.monotonic() - started < 5  # the loop went on while the lock was held
        assert committed_on[-1] == "refused" and not pending.done()
        holder.execute("ROLLBACK")
        await asyncio.wait_for(pending, 30)
        assert store.get_call("e", 2) is not None
        assert writer.stats.records == 3
    holder.close()
    store.close()


async def test_async_writer_isolates_a_bad_record(store):
    store.create_episode(Episode(id="e", key="k"))
    store.add_call(full_call("e", 0))
    async with AsyncCallWriter(store) as writer:
        results = await asyncio.gather(
            *(writer.add_call(full_call("e", i)) for i in range(0, 30)),
            writer.add_call(full_call("ghost", 0)),
            return_exceptions=True,
        )
    assert isinstance(results[0], DuplicateCallError)
    assert isinstance(results[-1], EpisodeNotFoundError)
    assert results[1:-1] == [None] * 29
    assert store.count_calls("e") == 30


# ---- export -------------------------------------------------------------------------------------------


def _export_fixture(store):
    store.create_episode(full_episode("ep-1", "k1"))
    store.create_episode(Episode(id="ep-2", key="k2", created_at=2e9))
    first = full_call("ep-1", 0)
    calls = [
        first,
        full_call("ep-1", 1, prompt_ids=first.prompt_ids + first.output_ids + [1], call_error="backend died"),
        CallRecord(episode_id="ep-2", index=0, prompt_ids=[1, 2], finish_reason=FinishReason.error),
    ]
    for call in calls:
        store.add_call(call)
    return [as_read_back(c) for c in calls]


EXPORT_COLUMNS = {
    "episode_id", "index", "prompt_ids", "output_ids", "output_logprobs", "finish_reason", "policy_version",
    "side_call", "segment", "break_reason", "call_error", "parse_error", "dialect", "sampling", "started_at",
    "finished_at", "timings", "metadata", "task", "harness", "attempt", "sample", "reward", "outcome",
}  # fmt: skip


def test_export_jsonl(store, tmp_path):
    calls = _export_fixture(store)
    out = tmp_path / "out" / "calls.jsonl"
    assert export_calls(store, out, format="jsonl") == 3
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert set(rows[0]) == EXPORT_COLUMNS
    for row, call in zip(rows, calls):
        assert (row["episode_id"], row["index"]) == (call.episode_id, call.index)
        assert row["prompt_ids"] == call.prompt_ids and row["output_ids"] == call.output_ids
        assert row["output_logprobs"] == call.output_logprobs
        assert SamplingParams.model_validate(row["sampling"]) == call.sampling
        assert row["finish_reason"] == call.finish_reason.value and row["call_error"] == call.call_error
        assert row["side_call"] == call.side_call and row["segment"] == call.segment
        assert row["break_reason"] == call.break_reason and row["dialect"] == call.dialect
    assert rows[0]["task"] == "fix-the-bug" and rows[0]["reward"] == 0.25 and rows[0]["outcome"] == "timeout"
    assert rows[2]["reward"] is None and rows[2]["outcome"] is None
    assert "k1" not in out.read_text()  # episode keys are secrets


def test_export_parquet(store, tmp_path):
    calls = _export_fixture(store)
    out = tmp_path / "calls.parquet"
    assert export_calls(tmp_path / "run", out, format="parquet") == 3  # by run directory
    table = pq.read_table(out)
    assert set(table.column_names) == EXPORT_COLUMNS
    assert table.schema.field("prompt_ids").type == pa.list_(pa.int32())
    assert table.schema.field("output_ids").type == pa.list_(pa.int32())
    assert table.schema.field("output_logprobs").type == pa.list_(pa.float32())
    rows = table.to_pylist()
    for row, call in zip(rows, calls):
        assert (row["episode_id"], row["index"]) == (call.episode_id, call.index)
        assert row["prompt_ids"] == call.prompt_ids and row["output_ids"] == call.output_ids
        assert row["output_logprobs"] == call.output_logprobs
        assert SamplingParams.model_validate_json(row["sampling"]) == call.sampling
        assert row["policy_version"] == call.policy_version and row["call_error"] == call.call_error
    assert rows[0]["harness"] == "claude-code" and rows[0]["reward"] == 0.25


def test_export_errors_and_empty_run(tmp_path):
    with pytest.raises(ValueError, match="unknown export format 'csv'"):
        export_calls(tmp_path, tmp_path / "x.csv", format="csv")
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        export_calls(tmp_path / "nothing", tmp_path / "x.jsonl")
    TrajectoryStore.open(tmp_path / "empty").close()
    assert export_calls(tmp_path / "empty", tmp_path / "e.parquet", format="parquet") == 0
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0
