"""Read-only queries over a run for readers that page through many episodes (the viewer, reports).

Everything here is SQL with indexes: a page of a run of 100k episodes never loads more than the page. Per-episode
call summaries (calls, sampled tokens, breaks, faults) come from the covering index `calls_summary`, so sorting a
whole run by them reads no call row and no blob.

    page = store.query_episodes(EpisodeQuery(outcome="failed", sort="tokens", descending=True, limit=50))
    for row in page.rows: row.episode, row.calls
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from openforge.core import Episode
from openforge.store.final import FINAL_SQL, GRADED_SQL
from openforge.store.rows import EPISODE_COLUMNS, row_to_episode

# Why an episode deserves a second look, one word each, computed in SQL so that the table can filter on it:
# `oom_killed` (the agent's command hit the memory limit), `tampered` (the grader found the agent changed what it
# must not: an `outcome_reason` starting "tampered", or a `tampered` entry in the episode's metadata),
# `late_calls` (a process the agent left behind called the model after the harness exited: refused, recorded).
FLAGS_SQL = (
    "trim((CASE WHEN json_extract(e.metadata, '$.transcript.oom_killed') THEN 'oom_killed ' ELSE '' END) || "
    "(CASE WHEN e.outcome_reason LIKE 'tampered%' OR json_extract(e.metadata, '$.tampered') IS NOT NULL "
    "THEN 'tampered ' ELSE '' END) || "
    "(CASE WHEN json_extract(e.metadata, '$.late_calls') > 0 THEN 'late_calls' ELSE '' END))"
)
STEP_SQL = "json_extract(e.metadata, '$.step')"
DURATION_SQL = "(e.ended_at - e.created_at)"

# (expression over one episode's calls, name): the columns of a `CallSummary`, in its field order
_SUMMARY_COLUMNS = (
    ("count(*)", "calls"),
    ("coalesce(sum(output_len), 0)", "output_tokens"),
    ("coalesce(max(prompt_len + output_len), 0)", "context_tokens"),
    ("coalesce(sum(side_call), 0)", "side_calls"),
    ("count(break_reason)", "breaks"),
    ("coalesce(sum(call_error IS NOT NULL), 0)", "call_errors"),
    ("coalesce(sum(parse_error IS NOT NULL), 0)", "parse_errors"),
)
_SUMMARY_SQL = f"SELECT episode_id, {', '.join(f'{x} AS {name}' for x, name in _SUMMARY_COLUMNS)} FROM calls"

_EPISODE_SORTS = {
    "created": "e.created_at",
    "task": "e.task",
    "harness": "e.harness",
    "sample": "e.sample",
    "attempt": "e.attempt",
    "step": STEP_SQL,
    "outcome": "e.outcome",
    "reward": "e.reward",
    "time": DURATION_SQL,
}
_SUMMARY_SORTS = {
    "calls": "s.calls",
    "tokens": "s.output_tokens",
    "context": "s.context_tokens",
    "breaks": "s.breaks",
    "faults": "(s.call_errors + s.parse_errors)",
}
SORT_KEYS: tuple[str, ...] = tuple(_EPISODE_SORTS) + tuple(_SUMMARY_SORTS)


@dataclass(frozen=True)
class EpisodeQuery:
    """Which episodes, in which order, which page. Every filter given must hold; `task` matches a substring."""

    task: str | None = None
    harness: str | None = None
    outcome: str | None = None
    step: int | None = None
    sample: int | None = None
    final_only: bool = False
    flagged_only: bool = False
    min_reward: float | None = None
    max_reward: float | None = None
    sort: str = "created"
    descending: bool = False
    limit: int = 50
    offset: int = 0

    def __post_init__(self) -> None:
        if self.sort not in SORT_KEYS:
            raise ValueError(f"sort must be one of {', '.join(SORT_KEYS)}, not {self.sort!r}")
        if not 1 <= self.limit <= 10_000:
            raise ValueError(f"limit must be between 1 and 10000, not {self.limit}")
        if self.offset < 0:
            raise ValueError(f"offset must be >= 0, not {self.offset}")


@dataclass(frozen=True)
class CallSummary:
    """An episode's calls in numbers (side calls included)."""

    calls: int = 0
    output_tokens: int = 0  # sampled
    context_tokens: int = 0  # the longest prompt + output of any call
    side_calls: int = 0
    breaks: int = 0  # calls that opened a new continuity segment
    call_errors: int = 0
    parse_errors: int = 0

    @property
    def faults(self) -> int:
        return self.call_errors + self.parse_errors


@dataclass(frozen=True)
class EpisodeRow:
    episode: Episode
    calls: CallSummary
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class EpisodePage:
    rows: list[EpisodeRow]
    total: int  # episodes matching the filters, over all pages


@dataclass(frozen=True)
class GroupRow:
    """A (step, task, harness) group of final episodes: the unit GRPO compares samples within."""

    step: int
    task: str | None
    harness: str | None
    episodes: int
    graded: int  # an outcome of the agent's (`core.GRADED_OUTCOMES`), with a reward
    mean_reward: float | None
    min_reward: float | None
    max_reward: float | None


@dataclass(frozen=True)
class Facets:
    """The values the episode filters can take in this run."""

    harnesses: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)


SQLValue = str | int | float  # a value bound to a `?` of a query


def _where(q: EpisodeQuery) -> tuple[str, list[SQLValue]]:
    clauses: list[str] = []
    args: list[SQLValue] = []
    if q.task:
        clauses.append("instr(e.task, ?) > 0")
        args.append(q.task)
    for column, value in (
        ("e.harness", q.harness),
        ("e.outcome", q.outcome),
        ("e.sample", q.sample),
        (STEP_SQL, q.step),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if q.final_only:
        clauses.append(FINAL_SQL)
    if q.flagged_only:
        clauses.append(f"{FLAGS_SQL} != ''")
    if q.min_reward is not None:
        clauses.append("e.reward >= ?")
        args.append(q.min_reward)
    if q.max_reward is not None:
        clauses.append("e.reward <= ?")
        args.append(q.max_reward)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def _episode_columns() -> str:
    return ", ".join(f"e.{c}" for c in EPISODE_COLUMNS)


def _summary(values: tuple) -> CallSummary:
    return CallSummary(*(int(v or 0) for v in values))


def query_episodes(conn: sqlite3.Connection, q: EpisodeQuery) -> EpisodePage:
    """In two steps, so that sorting a whole run carries narrow rows: the page's ids in order (joined to every
    episode's call summary, read from the covering index, when sorting by one), then the page's rows."""
    where, args = _where(q)
    total = int(conn.execute(f"SELECT count(*) FROM episodes e{where}", args).fetchone()[0])
    direction = "DESC" if q.descending else "ASC"
    if q.sort in _SUMMARY_SORTS:
        order = f"coalesce({_SUMMARY_SORTS[q.sort]}, 0)"
        source = f"episodes e LEFT JOIN ({_SUMMARY_SQL} GROUP BY episode_id) s ON s.episode_id = e.id"
    else:
        order = _EPISODE_SORTS[q.sort]
        order = f"{order} IS NULL, {order}"  # episodes without the value last, whichever the direction
        source = "episodes e"
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT e.id FROM {source}{where} ORDER BY {order} {direction}, e.created_at, e.id LIMIT ? OFFSET ?",
            [*args, q.limit, q.offset],
        )
    ]
    if not ids:
        return EpisodePage([], total)
    marks = ", ".join("?" * len(ids))
    found = {
        r[0]: r
        for r in conn.execute(f"SELECT {_episode_columns()}, {FLAGS_SQL} FROM episodes e WHERE e.id IN ({marks})", ids)
    }
    summaries = call_summaries(conn, ids)
    n = len(EPISODE_COLUMNS)
    rows = [
        EpisodeRow(row_to_episode(found[i][:n]), summaries.get(i, CallSummary()), _flags(found[i][n]))
        for i in ids
        if i in found
    ]
    return EpisodePage(rows, total)


def _flags(text: str | None) -> tuple[str, ...]:
    return tuple(text.split()) if text else ()


def call_summaries(conn: sqlite3.Connection, episode_ids: list[str]) -> dict[str, CallSummary]:
    """Per episode: calls, tokens, breaks, faults (from the covering index)."""
    out: dict[str, CallSummary] = {}
    for start in range(0, len(episode_ids), 500):  # SQLite's bound-parameter limit
        chunk = episode_ids[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        for row in conn.execute(f"{_SUMMARY_SQL} WHERE episode_id IN ({marks}) GROUP BY episode_id", chunk):
            out[row[0]] = _summary(row[1:])
    return out


def episode_flags(conn: sqlite3.Connection, episode_id: str) -> tuple[str, ...]:
    row = conn.execute(f"SELECT {FLAGS_SQL} FROM episodes e WHERE e.id = ?", (episode_id,)).fetchone()
    return _flags(row[0]) if row else ()


def facets(conn: sqlite3.Connection) -> Facets:
    harnesses = [
        r[0] for r in conn.execute("SELECT DISTINCT harness FROM episodes WHERE harness IS NOT NULL ORDER BY harness")
    ]
    outcomes = [
        r[0] for r in conn.execute("SELECT DISTINCT outcome FROM episodes WHERE outcome IS NOT NULL ORDER BY outcome")
    ]
    steps = [
        int(r[0])
        for r in conn.execute(f"SELECT DISTINCT {STEP_SQL} AS s FROM episodes e WHERE s IS NOT NULL ORDER BY s")
        if isinstance(r[0], int)
    ]
    return Facets(harnesses, outcomes, steps)


def final_episodes(conn: sqlite3.Connection) -> list[Episode]:
    """Every final episode (`openforge.store.final`), oldest first."""
    rows = conn.execute(
        f"SELECT {_episode_columns()} FROM episodes e WHERE {FINAL_SQL} ORDER BY e.created_at, e.id"
    ).fetchall()
    return [row_to_episode(r) for r in rows]


def count_unfinished(conn: sqlite3.Connection) -> int:
    """Episodes with no outcome yet: running, or cut short before they were graded (none of them is final)."""
    return int(conn.execute("SELECT count(*) FROM episodes WHERE outcome IS NULL").fetchone()[0])


def final_results(
    conn: sqlite3.Connection,
) -> list[tuple[str | None, str | None, str | None, str | None, float | None]]:
    """(task, harness, outcome, outcome_reason, reward) of every final episode: what reports are computed from."""
    return conn.execute(
        f"SELECT e.task, e.harness, e.outcome, e.outcome_reason, e.reward FROM episodes e WHERE {FINAL_SQL}"
    ).fetchall()


def query_groups(
    conn: sqlite3.Connection, step: int | None = None, limit: int = 50, offset: int = 0, task: str | None = None
) -> tuple[list[GroupRow], int]:
    """(step, task, harness) groups of final episodes, in step and task order; and how many groups there are."""
    clauses = [FINAL_SQL]
    args: list[SQLValue] = []
    if step is not None:
        clauses.append(f"{STEP_SQL} = ?")
        args.append(step)
    if task:
        clauses.append("instr(e.task, ?) > 0")
        args.append(task)
    where = " WHERE " + " AND ".join(clauses)
    keys = f"coalesce({STEP_SQL}, 0), e.task, e.harness"
    total = int(
        conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM episodes e{where} GROUP BY {keys})", args).fetchone()[0]
    )
    graded = GRADED_SQL
    rows = conn.execute(
        f"SELECT {keys}, count(*), sum({graded}), avg(CASE WHEN {graded} THEN e.reward END), "
        f"min(CASE WHEN {graded} THEN e.reward END), max(CASE WHEN {graded} THEN e.reward END) "
        f"FROM episodes e{where} GROUP BY {keys} ORDER BY {keys} LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    return [GroupRow(int(r[0]), r[1], r[2], int(r[3]), int(r[4] or 0), r[5], r[6], r[7]) for r in rows], total


def group_episodes(conn: sqlite3.Connection, step: int, task: str | None, harness: str | None) -> list[Episode]:
    """The final episodes of one (step, task, harness) group, oldest first."""
    rows = conn.execute(
        f"SELECT {_episode_columns()} FROM episodes e WHERE e.task IS ? AND e.harness IS ? "
        f"AND coalesce({STEP_SQL}, 0) = ? AND {FINAL_SQL} ORDER BY e.sample, e.created_at, e.id",
        (task, harness, step),
    ).fetchall()
    return [row_to_episode(r) for r in rows]
