"""Errors the trajectory store raises. All derive from `StoreError` (a kind of `openforge.core.errors`) so
callers can catch one type; `NotARunError` is the user's input (a path that holds no store), not the store's."""

from __future__ import annotations

from openforge.core.errors import ConfigurationError, StoreError

__all__ = [
    "CorruptRecordError",
    "DuplicateCallError",
    "DuplicateEpisodeError",
    "EpisodeNotFoundError",
    "NotARunError",
    "SchemaVersionError",
    "StoreClosedError",
    "StoreError",
]


class NotARunError(ConfigurationError, FileNotFoundError):
    """A directory given as a run holds no trajectory store (`trajectories.db`); the message names it."""


class SchemaVersionError(StoreError):
    """The database was written by a newer OpenForge (its schema version is higher than this code knows)."""

    def __init__(self, path: str, found: int, supported: int):
        super().__init__(
            f"{path} has schema version {found}, but this OpenForge supports at most version {supported}; "
            "upgrade OpenForge to open it (the file was not modified)"
        )
        self.found = found
        self.supported = supported


class DuplicateCallError(StoreError):
    """A call with the same (episode_id, index) is already stored; calls are written once, never replaced."""

    def __init__(self, episode_id: str, index: int):
        super().__init__(f"call {index} of episode {episode_id!r} is already stored; calls are write-once")
        self.episode_id = episode_id
        self.index = index


class DuplicateEpisodeError(StoreError):
    """An episode with the same id or key is already stored."""


class EpisodeNotFoundError(StoreError, LookupError):
    """The episode named does not exist in this run."""

    def __init__(self, episode_id: str):
        super().__init__(f"episode {episode_id!r} does not exist in this run (create_episode first)")
        self.episode_id = episode_id


class StoreClosedError(StoreError):
    """The store (or writer) was closed and can no longer be used."""


class CorruptRecordError(StoreError):
    """A stored row cannot be decoded (a prompt references a missing call, or a blob has an unknown codec)."""
