"""`scripted`: a deterministic policy that writes the model's *text*, for tests and teachers.

Two forms:

- a JSON file `{"turns": ["output of call 1", "output of call 2", ...], "side": "reply to side calls"}`:
  turns are replayed in order within each episode; side calls (titles, summaries) do not advance the turn and
  get `side` (default: an empty reply); after the last turn the last one repeats;
- a Python file defining `respond(conversation, call_index) -> str` (a third parameter, `task`, receives the
  episode's task when the function accepts it) and optionally `respond_side(conversation) -> str`.
  `respond` may also be a generator of text pieces: each piece is streamed as soon as it is yielded (tests use
  this to hold a reply half-written).

The text stands for what the model would sample, so its control markup (`<tool_call>`, `<think>`, ...) is
tokenized *as* control tokens, and the end-of-turn token is appended. Log-probabilities are 0.0: the policy
is deterministic. The policy's code runs in a worker thread, never on the event loop, so a slow policy
holds up only its own call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from openforge.core import Conversation, FinishReason, SamplingParams
from openforge.core.errors import ConfigurationError
from openforge.inference.base import (
    Backend,
    GenerationContext,
    GenerationResult,
    SampledToken,
    clamp_max_tokens,
    collect,
)

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from openforge.models import ModelDir

END_OF_TURN = "<|im_end|>"


class ScriptError(ConfigurationError, ValueError):
    """The script file is missing or malformed; the message says what is wrong."""


def encode_completion(tokenizer: Tokenizer, text: str) -> list[int]:
    """Text as the model would produce it: added/special tokens in the text become those tokens.

    (A `tokenizers.Tokenizer` matches its added tokens in `encode` unless told not to; ModelDir.encode_text
    deliberately turns that off for conversation content, which is why this is a separate function.)
    """
    return tokenizer.encode(text, add_special_tokens=False).ids


def end_of_turn_id(model_dir: ModelDir) -> int:
    tid = model_dir.tokenizer.token_to_id(END_OF_TURN)
    return tid if tid is not None else model_dir.eos_token_ids[0]


class ScriptedBackend(Backend):
    #: whether replies are cut at the request's `max_tokens` (as a sampler stops there); the context window
    #: always cuts them
    honours_max_tokens = True

    def __init__(self, script: str | Path | None, model_dir: str | Path | ModelDir, policy: _Policy | None = None):
        from openforge.models import ModelDir

        self.model_dir = model_dir if isinstance(model_dir, ModelDir) else ModelDir(model_dir)
        self.script = Path(script) if script is not None else Path(type(policy).__name__)
        self._policy = policy if policy is not None else _load_policy(self.script)
        self._turns_taken: dict[str, int] = defaultdict(int)  # episode -> main-line calls served
        self._end_of_turn = end_of_turn_id(self.model_dir)

    @property
    def max_context(self) -> int:
        return self.model_dir.max_context

    streams_tokens = True

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> GenerationResult:
        return await collect(self.stream(prompt_ids, sampling, ctx))

    async def stream(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> AsyncIterator[SampledToken | GenerationResult]:
        self.check_request(prompt_ids, sampling)
        if ctx.side_call:
            call = lambda: self._policy.side(ctx.conversation, ctx.task)  # noqa: E731
        else:
            index = self._turns_taken[ctx.episode_id]
            self._turns_taken[ctx.episode_id] = index + 1
            call = lambda: self._policy.respond(ctx.conversation, index, ctx.task)  # noqa: E731
        reply = await asyncio.to_thread(call)
        if self.honours_max_tokens:
            limit = clamp_max_tokens(len(prompt_ids), sampling, self.max_context)
        else:
            limit = max(0, self.max_context - len(prompt_ids))
        stop_ids = set(sampling.stop_token_ids) | set(self.model_dir.eos_token_ids)
        output: list[int] = []
        finish: FinishReason | None = None
        async for ids in self._pieces(reply):
            for token_id in ids:
                if len(output) >= limit:  # as a sampler stops at the budget
                    finish = FinishReason.length
                    break
                output.append(token_id)
                yield SampledToken(token_id, 0.0)
                if token_id in stop_ids:  # as a sampler stops at a stop token
                    finish = FinishReason.stop
                    break
            if finish is not None:
                break
        finish = finish or FinishReason.stop
        yield GenerationResult(
            output_ids=output, logprobs=[0.0] * len(output), finish_reason=finish, policy_version=self.policy_version
        )

    async def _pieces(self, reply: object) -> AsyncIterator[list[int]]:
        """The reply's token ids, piece by piece (a string is one piece), the end-of-turn token last unless
        the text already ends the turn."""
        if isinstance(reply, str):
            yield self._encode(reply)
            return
        if not isinstance(reply, Iterator):
            raise ScriptError(f"{self.script} returned {type(reply).__name__}, not the reply text (str)")
        last: list[int] = []
        while True:
            piece = await asyncio.to_thread(next, reply, None)  # the policy may block between pieces
            if piece is None:
                break
            if not isinstance(piece, str):
                raise ScriptError(f"{self.script} yielded {type(piece).__name__}, not a piece of text (str)")
            ids = self._encode_piece(piece)
            if ids:
                last = ids
                yield ids
        if not last or last[-1] not in self.model_dir.eos_token_ids:
            yield [self._end_of_turn]

    def _encode_piece(self, text: str) -> list[int]:
        return self.model_dir.encode_completion(text)

    def _encode(self, text: str) -> list[int]:
        ids = self._encode_piece(text)
        if not ids or ids[-1] not in self.model_dir.eos_token_ids:
            ids.append(self._end_of_turn)
        return ids


class _Policy:
    """Writes the reply text of a call: a string, or an iterator of pieces of it (a Python policy may return
    anything; `ScriptedBackend` checks). `task` is the episode's task as the context carries it."""

    def respond(self, conversation: Conversation | None, call_index: int, task: object) -> object:
        raise NotImplementedError

    def side(self, conversation: Conversation | None, task: object) -> object:
        return ""


class _TurnsPolicy(_Policy):
    def __init__(self, turns: list[str], side: str):
        self.turns, self.side_reply = turns, side

    def respond(self, conversation: Conversation | None, call_index: int, task: object) -> str:
        return self.turns[min(call_index, len(self.turns) - 1)]

    def side(self, conversation: Conversation | None, task: object) -> str:
        return self.side_reply


class _PythonPolicy(_Policy):
    def __init__(self, respond: Callable[..., object], respond_side: Callable[..., object] | None):
        self._respond, self._respond_side = respond, respond_side
        self._wants_task = _accepts_task(respond)

    def respond(self, conversation: Conversation | None, call_index: int, task: object) -> object:
        return (
            self._respond(conversation, call_index, task)
            if self._wants_task
            else self._respond(conversation, call_index)
        )

    def side(self, conversation: Conversation | None, task: object) -> object:
        return self._respond_side(conversation) if self._respond_side else ""


def _accepts_task(fn: Callable[..., object]) -> bool:
    params = list(inspect.signature(fn).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params) or any(p.name == "task" for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3


def _load_policy(path: Path) -> _Policy:
    if not path.is_file():
        raise ScriptError(f"scripted policy file {path} does not exist")
    if path.suffix == ".json":
        return _load_turns(path)
    if path.suffix == ".py":
        return _load_python(path)
    raise ScriptError(f"scripted policy {path} must be a .json file of turns or a .py file defining respond()")


def _load_turns(path: Path) -> _Policy:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ScriptError(f"{path} is not valid JSON: {exc}") from None
    turns = data.get("turns") if isinstance(data, dict) else None
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
        raise ScriptError(f'{path} must hold {{"turns": ["output of call 1", ...]}} with at least one string turn')
    side = data.get("side", "")
    if not isinstance(side, str):
        raise ScriptError(f'{path}: "side" must be a string (the reply to side calls)')
    return _TurnsPolicy(turns, side)


def _load_python(path: Path) -> _Policy:
    spec = importlib.util.spec_from_file_location(f"openforge_script_{uuid.uuid4().hex}", path)
    if spec is None or spec.loader is None:
        raise ScriptError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ScriptError(f"{path} failed to import: {type(exc).__name__}: {exc}") from exc
    respond = getattr(module, "respond", None)
    if not callable(respond):
        raise ScriptError(f"{path} must define respond(conversation, call_index) -> str")
    respond_side = getattr(module, "respond_side", None)
    return _PythonPolicy(respond, respond_side if callable(respond_side) else None)
