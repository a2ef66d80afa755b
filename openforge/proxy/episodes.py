"""Episodes as the proxy sees them: unguessable keys, lookup by key, call numbering.

docs/design.md, invariant 3: each episode has its own secret key, carried as the harness's API key. A key reads
and writes only its own episode; an ended key stops working.
"""

from __future__ import annotations

import secrets
import time
import uuid
from typing import Any

from openforge.core import Episode, EpisodeState, TaskPayload
from openforge.store import TrajectoryStore


def new_episode_key() -> str:
    # 256 bits, URL-safe: it travels as an API key, a header value, or a URL path segment.
    return "ofk-" + secrets.token_urlsafe(32)


class EpisodeRegistry:
    """Creates and finds episodes; the store is the source of truth, this keeps a small cache."""

    def __init__(self, store: TrajectoryStore):
        self.store = store
        self._by_key: dict[str, Episode] = {}
        self._next_index: dict[str, int] = {}

    def create(self, task: TaskPayload | dict | str | None = None, harness: str | None = None,
               metadata: dict | None = None) -> Episode:
        """`task`: a `TaskPayload` (the episode runners), or whatever JSON an orchestrator posted to the admin
        API (a dict, kept whole, or a task name)."""
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
            attempt=int(metadata.pop("attempt", 0)),
            sample=int(metadata.pop("sample", 0)),
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
        self._next_index.pop(episode_id, None)
        return episode

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

    def task_payload(self, episode: Episode) -> Any:
        return episode.metadata.get("task", episode.task)
