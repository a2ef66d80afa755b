"""Which teacher episodes SFT learns from — the paper's recipe, as `sft:` options: N teacher rollouts per task
(`rollouts_per_task`), keep the passed ones (`min_reward`), drop near-identical trajectories of the same task
(`dedup_similarity`), keep at most so many per task (`max_per_task`). Every episode left out is counted with
its reason, for the report.

Near-identical: the episodes' tool calls, in order, as text (`name {arguments as JSON}`, the reply text where
an episode made no call), compared with a Jaccard overlap of word shingles (`openforge.core.similarity`);
an episode at least `dedup_similarity` similar to one already kept for its task is a duplicate. The first
finished episode of a task is kept first.
"""

from __future__ import annotations

import json
from collections import defaultdict

from pydantic import BaseModel, Field

from openforge.core import CallRecord, Episode
from openforge.core.similarity import jaccard, shingles
from openforge.inference import MESSAGE_LEVEL
from openforge.store import TrajectoryStore
from openforge.train.config import SFTSettings

REASONS = ("infrastructure", "below_min_reward", "duplicate", "over_cap")


class TeacherSelection(BaseModel):
    """What the recipe did with a teacher run's final episodes."""

    episodes: int = 0
    kept: int = 0
    dropped: dict[str, int] = Field(default_factory=lambda: {r: 0 for r in REASONS})
    tasks: int = 0
    tasks_kept: int = 0  # tasks with at least one kept episode
    message_level: int = 0  # kept episodes recorded from a teacher behind an API (re-rendered for the student)
    kept_ids: list[str] = Field(default_factory=list, exclude=True)

    def line(self) -> str:
        dropped = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.dropped.items() if v) or "none"
        return (
            f"teacher episodes {self.episodes}: kept {self.kept} on {self.tasks_kept} of {self.tasks} tasks "
            f"(dropped: {dropped})"
        )


def trajectory_text(calls: list[CallRecord]) -> str:
    """An episode's actions as text: each tool call, in order; the replies' text where it made none."""
    parts: list[str] = []
    for call in sorted(calls, key=lambda c: c.index):
        if call.side_call or call.call_error:
            continue
        for tool_call in call.metadata.get("tool_calls") or []:
            parts.append(f"{tool_call.get('name')} {json.dumps(tool_call.get('arguments'), sort_keys=True)}")
    if not parts:
        for call in calls:
            reply = (call.metadata.get(MESSAGE_LEVEL) or {}).get("reply") or {}
            parts.append(reply.get("content") or "")
    return "\n".join(parts)


def select_teacher_episodes(store: TrajectoryStore, settings: SFTSettings) -> TeacherSelection:
    """Apply the recipe to every final episode of a teacher run (`TrajectoryStore.final_episodes`: retried
    attempts and unfinished episodes are not episodes of their own)."""
    out = TeacherSelection()
    by_task: dict[str, list[Episode]] = defaultdict(list)
    for episode in store.final_episodes():
        by_task[episode.task or episode.id].append(episode)
    out.tasks = len(by_task)
    for episodes in by_task.values():
        kept: list[frozenset[str]] = []
        for episode in sorted(episodes, key=lambda e: (e.ended_at or e.created_at, e.id)):
            out.episodes += 1
            reason = _reason(store, episode, settings, kept)
            if reason is not None:
                out.dropped[reason] += 1
                continue
            out.kept_ids.append(episode.id)
            out.message_level += any(MESSAGE_LEVEL in c.metadata for c in store.list_calls(episode.id))
        out.tasks_kept += bool(kept)
    out.kept = len(out.kept_ids)
    return out


def _reason(store: TrajectoryStore, episode: Episode, settings: SFTSettings, kept: list[frozenset[str]]) -> str | None:
    """Why `episode` is left out (None: kept, and its signature added to `kept`)."""
    if episode.outcome is None or episode.outcome.is_infrastructure_failure or episode.reward is None:
        return "infrastructure"
    if episode.reward < settings.min_reward:
        return "below_min_reward"
    signature = shingles(trajectory_text(store.list_calls(episode.id)))
    if settings.dedup_similarity is not None and any(jaccard(signature, k) >= settings.dedup_similarity for k in kept):
        return "duplicate"
    if settings.max_per_task is not None and len(kept) >= settings.max_per_task:
        return "over_cap"
    kept.append(signature)
    return None
