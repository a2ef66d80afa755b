"""Episodes as the proxy sees them: unguessable keys, lookup by key, call numbering.

docs/design.md, invariant 3: each episode has its own secret key, carried as the harness's API key. A key reads
and writes only its own episode; an ended key stops working. The episode runners end the key the moment the
harness exits, before grading: a call that comes later (a process the agent left behind) is refused with the
dialect's 401, and the first `LATE_CALLS_RECORDED` of them are recorded as calls of the episode, marked
`metadata["late"]` with a `call_error` (never trained on), and counted in the episode's `late_calls`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import Mapping

from openforge.core import CallRecord, Episode, EpisodeState, FinishReason, TaskPayload
from openforge.core.json_types import JSONValue
from openforge.store import TrajectoryStore

LATE_CALLS_RECORDED = 16  # per episode; later ones are refused without a record
LATE_BODY_KEPT = 64 << 10  # bytes of a late call's request body kept
LATE_CALL_ERROR = "refused: a late call (the episode's key ended when its harness exited)"


def new_episode_key() -> str:
    # 256 bits, URL-safe: it travels as an API key, a header value, or a URL path segment.
    return "ofk-" + secrets.token_urlsafe(32)


class EpisodeRegistry:
    """Creates and finds episodes; the store is the source of truth, this keeps a small cache."""

    def __init__(self, store: TrajectoryStore):
        self.store = store
        self._by_key: dict[str, Episode] = {}
        self._next_index: dict[str, int] = {}

    def create(
        self,
        task: TaskPayload | JSONValue = None,
        harness: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> Episode:
        """`task`: a `TaskPayload` (the episode runners), or whatever JSON an orchestrator posted to the admin
        API (a dict, kept whole, or a task name). `metadata`'s `attempt` and `sample` become the episode's
        fields (ValueError when they are not numbers)."""
        metadata = dict(metadata or {})
        if isinstance(task, TaskPayload):
            task = task.to_json()
        task_name = task
        if isinstance(task, dict):
            metadata["task"] = task
            task_name = task.get("id") or task.get("name")
        episode = Episode(
            id=uuid.uuid4().hex,
            key=new_episode_key(),
            task=None if task_name is None else str(task_name),
            harness=harness,
            attempt=_whole_number(metadata.pop("attempt", 0), "attempt"),
            sample=_whole_number(metadata.pop("sample", 0), "sample"),
            metadata=metadata,
        )
        self.store.create_episode(episode)
        self._by_key[episode.key] = episode
        self._next_index[episode.id] = 0
        return episode

    def by_key(self, key: str) -> Episode | None:
        """The live episode with this key; None for unknown and ended keys."""
        episode = self._by_key.get(key)
        if episode is None:
            episode = self.store.get_episode_by_key(key)
            if episode is None:
                return None
            self._by_key[key] = episode
        return None if episode.state == EpisodeState.ended else episode

    def get(self, episode_id: str) -> Episode | None:
        return self.store.get_episode(episode_id)

    def end(self, episode_id: str) -> Episode | None:
        episode = self.store.get_episode(episode_id)
        if episode is None:
            return None
        if episode.state != EpisodeState.ended:
            episode = self.store.update_episode(episode_id, state=EpisodeState.ended, ended_at=time.time())
        self._by_key[episode.key] = episode
        return episode

    def ended_by_key(self, key: str) -> Episode | None:
        """The ended episode with this key, while it may record a late call; None otherwise."""
        episode = self._by_key.get(key) or self.store.get_episode_by_key(key)
        if episode is None or episode.state != EpisodeState.ended:
            return None
        return episode if episode.metadata.get("late_calls", 0) < LATE_CALLS_RECORDED else None

    def record_late_call(self, episode: Episode, dialect: str, body: bytes, response: bytes) -> None:
        """Record a refused call that came after the episode's key ended, and count it on the episode."""
        now = time.time()
        self.store.add_call(
            CallRecord(
                episode_id=episode.id,
                index=self.next_index(episode.id),
                prompt_ids=[],
                dialect=dialect,
                finish_reason=FinishReason.error,
                call_error=LATE_CALL_ERROR,
                started_at=now,
                finished_at=now,
                request_body=body[:LATE_BODY_KEPT],
                response_body=response,
                metadata={"late": True},
            )
        )
        current = self.store.get_episode(episode.id) or episode
        metadata = {**current.metadata, "late_calls": int(current.metadata.get("late_calls", 0)) + 1}
        self._by_key[episode.key] = self.store.update_episode(episode.id, metadata=metadata)

    async def running(self, episode: Episode) -> None:
        """`mark_running`, off the loop (a store write) and only for an episode's first call."""
        if episode.state == EpisodeState.created:
            await asyncio.to_thread(self.mark_running, episode)

    def mark_running(self, episode: Episode) -> None:
        if episode.state == EpisodeState.created:
            updated = self.store.update_episode(episode.id, state=EpisodeState.running)
            self._by_key[episode.key] = updated

    def calls_before_this_process(self, episode_id: str) -> int:
        """How many calls the episode had before this process first served it (0 after that): more than 0
        means the proxy restarted in the middle of the episode."""
        if episode_id in self._next_index:
            return 0
        count = self.store.count_calls(episode_id)
        self._next_index[episode_id] = count
        return count

    def next_index(self, episode_id: str) -> int:
        self.calls_before_this_process(episode_id)
        index = self._next_index[episode_id]
        self._next_index[episode_id] = index + 1
        return index

    def task_payload(self, episode: Episode) -> JSONValue:
        """The task as the episode was created with it: its JSON, or its name."""
        return episode.metadata.get("task", episode.task)


def _whole_number(value: JSONValue, name: str) -> int:
    if not isinstance(value, int | float | str):
        raise ValueError(f"metadata.{name} must be a number, got {value!r}")
    return int(value)
