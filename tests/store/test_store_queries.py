"""Read-only opening and the read-only queries readers page through a run with (filters, sorts, pages, call
summaries from the covering index, GRPO groups)."""

from __future__ import annotations

import random
import sqlite3

import pytest

from openforge.core import Episode, Outcome
from openforge.store import EpisodeQuery, StoreError, TrajectoryStore
from openforge.store.schema import LATEST_VERSION
from support.viewer_runs import add_episode, make_run


@pytest.fixture()
def run(tmp_path):
    named = make_run(tmp_path)
    return tmp_path, named


def test_readonly_store_reads_and_refuses_every_write(run):
    path, named = run
    with TrajectoryStore.open(path, readonly=True) as store:
        assert store.readonly
        assert store.count_episodes() == len(named)
        assert store.get_episode(named["markup"].id).task == "probe-markup"
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.set_run_info({"x": 1})
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.update_episode(named["markup"].id, reward=1.0)
    with TrajectoryStore.open(path, readonly=True) as store:
        assert store.get_episode(named["markup"].id).reward == 0.0


def test_readonly_open_of_a_missing_or_old_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="no trajectories.db"):
        TrajectoryStore.open(tmp_path / "nothing", readonly=True)
    assert not (tmp_path / "nothing").exists()  # nothing created
    old = tmp_path / "old"
    old.mkdir()
    conn = sqlite3.connect(old / "trajectories.db")
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    with pytest.raises(StoreError, match="schema version 1.*migrate"):
        TrajectoryStore.open(old, readonly=True)


def test_summary_index_exists_and_covers_the_summary_query(run):
    path, _ = run
    with TrajectoryStore.open(path, readonly=True) as store:
        conn = store._conn()
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION >= 4
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT episode_id, count(*), sum(output_len), "
            "max(prompt_len + output_len), sum(side_call), count(break_reason), "
            "sum(call_error IS NOT NULL), sum(parse_error IS NOT NULL) FROM calls GROUP BY episode_id"
        ).fetchall()
    assert "COVERING INDEX calls_summary" in str(plan)


def test_filters_sorts_and_pages(run):
    path, named = run
    with TrajectoryStore.open(path, readonly=True) as store:
        everything = store.query_episodes(EpisodeQuery(limit=100))
        assert everything.total == len(named) == len(everything.rows)
        assert [r.episode.created_at for r in everything.rows] == sorted(r.episode.created_at for r in everything.rows)

        failed = store.query_episodes(EpisodeQuery(outcome="failed"))
        assert {r.episode.id for r in failed.rows} == {e.id for e in named.values() if e.outcome == Outcome.failed}
        claude = store.query_episodes(EpisodeQuery(harness="claude-code", task="markup"))
        assert {r.episode.id for r in claude.rows} == {named["claude-0"].id, named["claude-1"].id}
        step1 = store.query_episodes(EpisodeQuery(step=1, min_reward=0.5))
        assert {r.episode.task for r in step1.rows} == {"grp-signal", "grp-flat"} and step1.total == 4

        # pages of 3 cover everything once, in order
        seen = []
        for offset in range(0, everything.total, 3):
            page = store.query_episodes(EpisodeQuery(limit=3, offset=offset))
            assert page.total == everything.total
            seen += [r.episode.id for r in page.rows]
        assert seen == [r.episode.id for r in everything.rows]

        by_tokens = store.query_episodes(EpisodeQuery(sort="tokens", descending=True, limit=100)).rows
        tokens = [r.calls.output_tokens for r in by_tokens]
        assert tokens == sorted(tokens, reverse=True)
        by_reward = store.query_episodes(EpisodeQuery(sort="reward", limit=100)).rows
        rewards = [r.episode.reward for r in by_reward]
        assert rewards[-1] is None and rewards[:-1] == sorted(rewards[:-1])  # unrewarded episodes last
        with pytest.raises(ValueError, match="sort must be one of"):
            EpisodeQuery(sort="key")


def test_call_summaries_and_flags(run):
    path, named = run
    with TrajectoryStore.open(path, readonly=True) as store:
        rows = {
            r.episode.id: r for r in store.query_episodes(EpisodeQuery(sort="faults", descending=True, limit=100)).rows
        }
        brk = rows[named["break"].id].calls
        assert (brk.calls, brk.breaks, brk.faults) == (3, 1, 0)
        assert rows[named["parse"].id].calls.parse_errors == 1
        assert rows[named["call_error"].id].calls.call_errors == 1
        plain = rows[named["image"].id].calls
        calls = store.list_calls(named["image"].id)
        assert plain.output_tokens == sum(len(c.output_ids) for c in calls)
        assert plain.context_tokens == max(len(c.prompt_ids) + len(c.output_ids) for c in calls)
        assert rows[named["oom"].id].flags == ("oom_killed",)
        flagged = store.query_episodes(EpisodeQuery(flagged_only=True))
        assert [r.episode.id for r in flagged.rows] == [named["oom"].id]
        assert store.episode_flags(named["oom"].id) == ("oom_killed",)


def test_tampered_flag_from_outcome_reason(tmp_path):
    with TrajectoryStore.open(tmp_path) as store:
        add_episode(
            store, random.Random(1), task="t", reward=0.0, outcome=Outcome.failed, reason="tampered: /usr/bin/python3"
        )
    with TrajectoryStore.open(tmp_path, readonly=True) as store:
        assert store.query_episodes(EpisodeQuery(flagged_only=True)).rows[0].flags == ("tampered",)


def test_facets_groups_and_final_results(run):
    path, named = run
    with TrajectoryStore.open(path, readonly=True) as store:
        facets = store.facets()
        assert facets.harnesses == ["claude-code", "react"] and facets.steps == [0, 1]
        assert set(facets.outcomes) == {"passed", "failed", "sandbox_error"}
        groups, total = store.query_groups(step=1)
        assert total == 2
        signal = next(g for g in groups if g.task == "grp-signal")
        assert (signal.episodes, signal.graded, signal.min_reward, signal.max_reward) == (4, 4, 0.0, 1.0)
        members = store.group_episodes(1, "grp-signal", "react")
        assert [e.sample for e in members] == [0, 1, 2, 3]
        results = store.final_results()
        assert len(results) == len(named)
        assert ("probe-infra", "react", "sandbox_error", "the container died: OOM", None) in results


def test_non_final_attempts_are_filtered(tmp_path):
    with TrajectoryStore.open(tmp_path) as store:
        rng = random.Random(2)
        retried = add_episode(store, rng, task="t", reward=None, outcome=Outcome.timeout, metadata={"final": False})
        final = add_episode(store, rng, task="t")
        store.create_episode(Episode(id="bare", key="k-bare", task="t", reward=1.0, outcome=Outcome.passed))
    with TrajectoryStore.open(tmp_path, readonly=True) as store:
        ids = {r.episode.id for r in store.query_episodes(EpisodeQuery(final_only=True)).rows}
        assert ids == {final.id, "bare"} and retried.id not in ids  # no flag: final once it has an outcome
