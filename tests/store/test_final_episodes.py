"""Which episodes count: the store's one rule (`openforge.store.final`), on one real SQLite file that holds every
case — attempts retried after an infrastructure failure, a slot whose last attempt failed for the infrastructure
too, an attempt cut short before grading, and episodes written without the `final` flag into a store made at
schema version 1 and migrated on open — and every reader counting the same episodes: the eval report, behaviour
analysis, assembly, teacher selection, the viewer, the ATIF export and `--resume`."""

from __future__ import annotations

import json
import random
import sqlite3
import uuid

import pytest

from openforge.analysis import analyze_store
from openforge.core import CallRecord, Episode, EpisodeState, Outcome
from openforge.eval.report import build_report
from openforge.rollout.orchestrator import finished_slots
from openforge.rollout.outcome import AttemptResult, record_outcome
from openforge.store import DB_FILENAME, EpisodeQuery, TrajectoryStore, is_final, is_retried
from openforge.store.rows import EPISODE_COLUMNS, episode_to_row
from openforge.store.schema import LATEST_VERSION, migrate, schema_version
from openforge.train.assemble import assemble_run
from openforge.train.config import SFTSettings
from openforge.train.teacher_selection import select_teacher_episodes
from openforge.view.atif import export_atif
from openforge.view.summary import summarize
from support.viewer_runs import body

T0 = 1_700_000_000.0


def episode(name: str, n: int, task: str, slot: str | None = None, attempt: int = 0) -> Episode:
    """A new episode as the orchestrator creates it (no outcome, no `final` flag yet), `n` seconds into the run."""
    metadata = {"task": {"id": task, "instruction": f"Do {task}."}, "step": 0}
    if slot is not None:
        metadata["slot"] = slot
    return Episode(
        id=name,
        key=uuid.uuid4().hex,
        task=task,
        harness="react",
        attempt=attempt,
        state=EpisodeState.ended,
        created_at=T0 + n,
        ended_at=T0 + n + 1,
        metadata=metadata,
    )


def one_call(e: Episode, rng: random.Random) -> CallRecord:
    prompt, output = [rng.randrange(300, 900) for _ in range(20)], [rng.randrange(300, 900) for _ in range(6)]
    return CallRecord(
        episode_id=e.id,
        index=0,
        prompt_ids=prompt,
        output_ids=output,
        output_logprobs=[-0.5] * len(output),
        started_at=e.created_at + 0.1,
        finished_at=e.created_at + 0.5,
        request_body=body([{"role": "user", "content": f"Do {e.task}."}]),
    )


def attempt(
    store: TrajectoryStore,
    e: Episode,
    rng: random.Random,
    outcome: Outcome | None,
    final: bool = True,
    reward: float | None = None,
) -> None:
    """One attempt, recorded as the orchestrator records it (`record_outcome` writes the outcome and the flag);
    `outcome` None: the process died before grading, nothing was recorded."""
    store.create_episode(e)
    store.add_calls([one_call(e, rng)])
    if outcome is not None:
        record_outcome(
            store, AttemptResult(e.id, outcome, reward, reason=None if reward is not None else "boom"), final
        )


# id → counts. Retried attempts, an attempt cut short, and a store-API episode that was never graded do not.
COUNTS = {
    "old-graded": True,
    "old-unfinished": False,  # written without the flag, at schema version 1
    "a0-retried": False,
    "a1-passed": True,  # slot a: a sandbox error retried, then passed
    "b0-retried": False,
    "b1-infra": True,  # slot b: the last attempt failed for the infrastructure too
    "c0-failed": True,  # slot c: failed, reward 0
    "d0-retried": False,
    "d1-cut-short": False,  # slot d: retried, then the process died before grading
}
FINAL = {name for name, counts in COUNTS.items() if counts}
GRADED = {"old-graded", "a1-passed", "c0-failed"}


def write_v1_store(run) -> None:
    """A store as schema version 1 left it, holding episodes written without the `final` flag (by the store's
    API, outside the orchestrator): one graded, one that never got an outcome."""
    run.mkdir(parents=True)
    path = str(run / DB_FILENAME)
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, path, target=1)
    graded = episode("old-graded", 0, "t-old").model_copy(update={"outcome": Outcome.passed, "reward": 1.0})
    unfinished = episode("old-unfinished", 1, "t-old-2").model_copy(update={"state": EpisodeState.running})
    marks = ", ".join("?" * len(EPISODE_COLUMNS))
    for e in (graded, unfinished):
        conn.execute(f"INSERT INTO episodes ({', '.join(EPISODE_COLUMNS)}) VALUES ({marks})", episode_to_row(e))
    assert schema_version(conn) == 1
    conn.close()


@pytest.fixture()
def run(tmp_path):
    run = tmp_path / "run"
    write_v1_store(run)
    rng = random.Random(0)
    with TrajectoryStore.open(run) as store:  # migrates v1 → latest, then the orchestrator's attempts
        store.add_calls([one_call(store.get_episode("old-graded"), rng)])
        attempt(store, episode("a0-retried", 10, "t-a", "a"), rng, Outcome.sandbox_error, final=False)
        attempt(store, episode("a1-passed", 11, "t-a", "a", 1), rng, Outcome.passed, reward=1.0)
        attempt(store, episode("b0-retried", 12, "t-b", "b"), rng, Outcome.harness_crash, final=False)
        attempt(store, episode("b1-infra", 13, "t-b", "b", 1), rng, Outcome.timeout, final=True)
        attempt(store, episode("c0-failed", 14, "t-c", "c"), rng, Outcome.failed, reward=0.0)
        attempt(store, episode("d0-retried", 15, "t-d", "d"), rng, Outcome.proxy_error, final=False)
        attempt(store, episode("d1-cut-short", 16, "t-d", "d", 1), rng, None)
    with sqlite3.connect(run / DB_FILENAME) as conn:
        assert schema_version(conn) == LATEST_VERSION
    return run


def test_the_one_rule_in_python_and_sql(run):
    with TrajectoryStore.open(run, readonly=True) as store:
        everything = store.list_episodes()
        assert {e.id for e in everything} == set(COUNTS)
        assert "final" not in store.get_episode("old-graded").metadata  # no flag: counts once it has an outcome
        assert {e.id: is_final(e) for e in everything} == COUNTS
        assert [e.id for e in store.final_episodes()] == [e.id for e in everything if COUNTS[e.id]]  # oldest first
        assert {r[:3] for r in store.final_results()} == {
            ("t-old", "react", "passed"),
            ("t-a", "react", "passed"),
            ("t-b", "react", "timeout"),
            ("t-c", "react", "failed"),
        }
        assert {e.id for e in everything if is_retried(e)} == {"a0-retried", "b0-retried", "d0-retried"}
        assert store.count_unfinished() == 2


def test_the_rule_on_every_value_a_flag_can_take(tmp_path):
    """Python and SQL agree on any JSON the flag may hold, and on an episode that has no outcome."""
    flags = {"true": True, "false": False, "one": 1, "zero": 0, "null": None, "text": "no", "missing": ...}
    with TrajectoryStore.open(tmp_path) as store:
        for n, (name, flag) in enumerate(flags.items()):
            for graded in (True, False):
                e = episode(f"{name}-{graded}", n, "t")
                e.metadata.update({} if flag is ... else {"final": flag})
                store.create_episode(e.model_copy(update={"outcome": Outcome.passed if graded else None}))
        in_sql = {e.id for e in store.final_episodes()}
        assert {e.id for e in store.list_episodes() if is_final(e)} == in_sql
        assert in_sql == {f"{name}-True" for name in ("true", "one", "null", "text", "missing")}


def test_every_reader_counts_the_same_episodes(run, tmp_path):
    with TrajectoryStore.open(run) as store:
        report = build_report(store)  # openforge eval
        assert (report["episodes"], report["graded"]) == (len(FINAL), len(GRADED))
        assert report["outcomes"]["timeout"] == 1 and report["outcomes"]["sandbox_error"] == 0

        analysed = analyze_store(run, run)  # openforge analyze
        assert {b.episode_id for b in analysed.episodes} == FINAL

        samples, metrics = assemble_run(store)  # training: assembly
        assert metrics.episodes_dropped == {"not_final": len(COUNTS) - len(FINAL), "timeout": 1}
        assert metrics.episodes_used == len(GRADED) and {s.metadata["task"] for s in samples} == {"t-old", "t-a", "t-c"}

        selection = select_teacher_episodes(store, SFTSettings())  # training: the teacher's episodes for SFT
        assert selection.episodes == len(FINAL) and selection.tasks == 4
        assert selection.dropped == {"infrastructure": 1, "below_min_reward": 1, "duplicate": 0, "over_cap": 0}
        assert selection.kept_ids == ["old-graded", "a1-passed"]

        assert finished_slots(store) == {"a", "b", "c"}  # --resume redoes slot d

    with TrajectoryStore.open(run, readonly=True) as store:  # the viewer
        summary = summarize(store)
        assert (summary.episodes, summary.final, summary.graded) == (len(COUNTS), len(FINAL), len(GRADED))
        assert summary.outcomes == {"passed": 2, "unfinished": 2, "failed": 1, "timeout": 1}
        assert summary.pass_at_1 == pytest.approx(2 / 3)
        assert {r.episode.id for r in store.query_episodes(EpisodeQuery(final_only=True)).rows} == FINAL
        groups, _ = store.query_groups()
        assert sum(g.episodes for g in groups) == len(FINAL) and sum(g.graded for g in groups) == len(GRADED)

    export_atif(run, tmp_path / "atif")  # the ATIF export says which episodes count
    exported = [json.loads(line) for line in (tmp_path / "atif" / "index.jsonl").read_text().splitlines()]
    finals = {}
    for entry in exported:
        trajectory = json.loads((tmp_path / "atif" / entry["path"]).read_text())
        finals[trajectory["extra"]["openforge"]["episode_id"]] = trajectory["extra"]["openforge"]["final"]
    assert finals == COUNTS == {entry["episode_id"]: entry["final"] for entry in exported}
