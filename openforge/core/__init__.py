"""Canonical types shared by every part of OpenForge. Pure data, no I/O."""

from openforge.core.conversation import (
    Conversation,
    ImageRef,
    Message,
    ParsedOutput,
    Role,
    SamplingParams,
    ToolCall,
    ToolSpec,
)
from openforge.core.records import (
    GRADED_OUTCOMES,
    CallImage,
    CallRecord,
    Episode,
    EpisodeState,
    FinishReason,
    Outcome,
    Sample,
)
from openforge.core.task_payload import TaskPayload

__all__ = [
    "GRADED_OUTCOMES",
    "CallImage",
    "CallRecord",
    "Conversation",
    "Episode",
    "EpisodeState",
    "FinishReason",
    "ImageRef",
    "Message",
    "Outcome",
    "ParsedOutput",
    "Role",
    "Sample",
    "SamplingParams",
    "TaskPayload",
    "ToolCall",
    "ToolSpec",
]
