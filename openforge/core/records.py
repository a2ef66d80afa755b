"""Records of what happened: episodes, model calls, and training samples.

These names are a public format (`openforge export` writes them): keep fields stable, add rather than rename.
"""

from __future__ import annotations

import enum
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from openforge.core.conversation import SamplingParams


class EpisodeState(str, enum.Enum):
    created = "created"  # key issued, no call yet
    running = "running"  # at least one call served
    ended = "ended"  # closed by the orchestrator; the key no longer works


class Outcome(str, enum.Enum):
    """How a graded episode ended. `passed`, `failed` and `verifier_failed` (the agent made its verifier fail:
    reward 0) are the agent's doing, its graded outcomes (`GRADED_OUTCOMES`); the rest are infrastructure
    failures: kept out of training and never counted as reward 0."""

    passed = "passed"
    failed = "failed"
    sandbox_error = "sandbox_error"
    proxy_error = "proxy_error"
    harness_crash = "harness_crash"
    timeout = "timeout"
    verifier_error = "verifier_error"
    verifier_failed = "verifier_failed"

    @property
    def is_infrastructure_failure(self) -> bool:
        return self not in GRADED_OUTCOMES


#: The agent's outcomes: graded samples (pass@k, training); every other outcome is the infrastructure's.
GRADED_OUTCOMES = frozenset({Outcome.passed, Outcome.failed, Outcome.verifier_failed})


class FinishReason(str, enum.Enum):
    stop = "stop"  # an end-of-turn / stop token or stop string
    length = "length"  # max_tokens or the context ran out
    cancelled = "cancelled"  # the caller went away
    error = "error"  # the backend failed


class Episode(BaseModel):
    """One attempt of one harness at one task. `key` is the secret the harness uses as its API key."""

    model_config = ConfigDict(extra="forbid")

    id: str
    key: str
    task: str | None = None
    harness: str | None = None
    attempt: int = Field(default=0, ge=0)
    sample: int = Field(default=0, ge=0)
    state: EpisodeState = EpisodeState.created
    outcome: Outcome | None = None
    outcome_reason: str | None = None
    reward: float | None = None
    created_at: float = Field(default_factory=time.time)
    ended_at: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class CallImage(BaseModel):
    """An image the harness sent in a call's request, as the store keeps it.

    An inline image (base64, a data URL) has its bytes' `sha256`; the store holds those bytes once per hash
    (not once per call) and `span` = (offset, length) says where its base64 text sits in `request_body`, so
    the body is stored without it and rebuilt exactly. `span` is None when the text is not in the body verbatim
    (JSON escapes in it, or base64 that is not canonical): the body then keeps it. An image sent by reference
    has `url` (an http(s) URL or a file id) and no hash.
    """

    model_config = ConfigDict(extra="forbid")

    sha256: str | None = None
    media_type: str | None = None
    size: int = Field(default=0, ge=0)
    url: str | None = None
    span: tuple[int, int] | None = None


class CallRecord(BaseModel):
    """One model call as served: token for token what the backend saw and sampled.

    - `segment`: continuity segment within the episode. Calls in one segment extend each other exactly
      (prompt of call k+1 starts with prompt + output of call k); `break_reason` says why a call opened a
      new segment (None for the first call and for calls that continue).
    - `output_logprobs`: log-probabilities of the sampled tokens under the sampling distribution (after
      temperature, before top-p/top-k truncation); `sampling` holds the parameters used.
    - `call_error`: set when the backend failed; such a call has no usable output.
    - `request_body` / `response_body`: the bytes as received from and sent to the harness.
    - `images`: the images of the request, in the order the body holds them (`CallImage`).
    """

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    index: int = Field(ge=0)
    prompt_ids: list[int]
    output_ids: list[int] = []
    output_logprobs: list[float] = []
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    finish_reason: FinishReason = FinishReason.stop
    policy_version: int = Field(default=0, ge=0)
    started_at: float = Field(default_factory=time.time)
    finished_at: float | None = None
    timings: dict[str, float] = {}
    dialect: str = "chat_completions"
    side_call: bool = False
    segment: int = Field(default=0, ge=0)
    break_reason: str | None = None
    call_error: str | None = None
    parse_error: str | None = None
    request_body: bytes = b""
    response_body: bytes = b""
    metadata: dict[str, Any] = {}
    images: list[CallImage] = []

    @model_validator(mode="after")
    def _logprobs_match_outputs(self) -> CallRecord:
        if self.output_logprobs and len(self.output_logprobs) != len(self.output_ids):
            raise ValueError(
                f"output_logprobs has {len(self.output_logprobs)} entries for {len(self.output_ids)} output ids"
            )
        return self


class Sample(BaseModel):
    """A training sequence: `token_ids` with a per-token `loss_mask` (1 = the model sampled it, train on it).

    `logprobs` are the rollout log-probabilities aligned with `token_ids` (0.0 where the mask is 0);
    `group_id` is the GRPO group (training step, task, harness); `reward` is the episode's reward.
    """

    model_config = ConfigDict(extra="forbid")

    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    reward: float
    group_id: str
    episode_id: str
    segment: int = 0
    prompt_length: int = 0  # tokens before the first trained token
    policy_versions: list[int] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _aligned(self) -> Sample:
        n = len(self.token_ids)
        if len(self.loss_mask) != n or len(self.logprobs) != n:
            raise ValueError(
                f"token_ids ({n}), loss_mask ({len(self.loss_mask)}) and logprobs ({len(self.logprobs)}) "
                "must have the same length"
            )
        return self
