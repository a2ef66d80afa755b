"""Backends that answer in messages, not token ids: a model behind someone else's API (a teacher, a task
generator), reached through its own wire format (`upstream.py`).

Such a backend never sees the student's tokens, so the proxy cannot record token ids for its calls
(docs/design.md, invariant 1, "message-level calls"): it records the conversation and the reply — text, tool
calls, reasoning — and marks the call `message_level`; SFT re-renders those recordings with the student's own
chat template and tokenizer (`openforge.train.rerender`).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

from openforge.core import Conversation, FinishReason, ParsedOutput, SamplingParams
from openforge.inference.base import Backend, BackendError, GenerationContext, GenerationResult

# `CallRecord.metadata` key of a message-level call: what the upstream said and who said it.
MESSAGE_LEVEL = "message_level"

# No context limit the proxy could know: the upstream refuses a prompt that is too long itself.
UNKNOWN_CONTEXT = 1 << 30


@dataclass
class MessageResult:
    """One reply of an upstream model: what it said, why it stopped, what it counted."""

    output: ParsedOutput
    finish_reason: FinishReason
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)


class MessageBackend(Backend):
    """A backend whose calls are whole messages (`complete`); it has no token-level `generate`. Its policy
    version stays 0: nothing here changes its weights."""

    @property
    def max_context(self) -> int:
        return UNKNOWN_CONTEXT

    @property
    @abc.abstractmethod
    def spec(self) -> str:
        """The backend spec it was made from (recorded with every call)."""

    @abc.abstractmethod
    async def complete(
        self, conversation: Conversation, sampling: SamplingParams, ctx: GenerationContext
    ) -> MessageResult:
        """The model's reply to `conversation`. BackendError when the upstream fails or answers nonsense;
        InvalidRequestError when it refuses the request itself (400)."""

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> GenerationResult:
        raise BackendError(
            f"{self.spec} answers whole messages, not token ids: serve it through the proxy, which calls `complete`"
        )
