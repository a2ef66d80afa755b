"""What the episode runners need from the rooms around them, declared here, where it is used.

A running proxy (`openforge.proxy.server.RunningProxy`) is an `EpisodeServer`; sandboxes come from a
`openforge.sandbox.SandboxProvider`; outcomes are written to an `openforge.store.TrajectoryStore`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from openforge.core import Episode, TaskPayload
from openforge.core.json_types import JSONValue
from openforge.store import TrajectoryStore


class EpisodeServer(Protocol):
    """A model API that records each episode's calls under the episode's own key."""

    url: str | None  # the model API over TCP (None: only the Unix socket serves it)
    uds: Path | None  # the model API's Unix socket (what sandboxes are bridged to)
    store: TrajectoryStore  # where the episodes and their calls are recorded

    @property
    def served_model(self) -> str: ...

    def create_episode(
        self,
        task: TaskPayload | None = None,
        harness: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> Episode: ...

    def end_episode(self, episode_id: str) -> None: ...
