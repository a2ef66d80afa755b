"""The episodes a stage has just run, read back from the store they ran against."""

from __future__ import annotations

from openforge.core import Episode
from openforge.store import EpisodeNotFoundError, TrajectoryStore


def stored_episode(store: TrajectoryStore, episode_id: str) -> Episode:
    """Episode `episode_id` as `store` holds it. The stage created it there, so a store without it is not the
    one it ran against: `EpisodeNotFoundError`, not a None for the caller to trip over."""
    episode = store.get_episode(episode_id)
    if episode is None:
        raise EpisodeNotFoundError(episode_id)
    return episode
