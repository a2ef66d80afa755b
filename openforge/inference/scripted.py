"""`scripted`: a deterministic policy that writes the model's *text*, for tests and teachers.

Two forms:

- a JSON file `{"turns": ["output of call 1", "output of call 2", ...], "side": "reply to side calls"}`:
  turns are replayed in order within each episode; side calls (titles, summaries) do not advance the turn and
  get `side` (default: an empty reply); after the last turn the last one repeats;
- a Python file defining `respond(conversation, call_index) -> str` (a third parameter, `task`, receives the
  episode's task when the function accepts it) and optionally `respond_side(conversation) -> str`.

The text stands for what the model would sample, so its control markup (`<tool_call>`, `<think>`, ...) is
tokenized *as* control tokens, and the end-of-turn token is appended. Log-probabilities are 0.0: the policy
is deterministic.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from openforge.core import Conversation, FinishReason, SamplingParams
from openforge.inference.base import Backend, GenerationContext, GenerationResult, clamp_max_tokens

END_OF_TURN = "<|im_end|>"


class ScriptError(ValueError):
    """The script file is missing or malformed; the message says what is wrong."""


def encode_completion(tokenizer, text: str) -> list[int]:
    """Text as the model would produce it: added/special tokens in the text become those tokens.

    (A `tokenizers.Tokenizer` matches its added tokens in `encode` unless told not to; ModelDir.encode_text
    deliberately turns that off for conversation content, which is why this is a separate function.)
    """
    return tokenizer.encode(text, add_special_tokens=False).ids


def end_of_turn_id(model_dir) -> int:
    tid = model_dir.tokenizer.token_to_id(END_OF_TURN)
    return tid if tid is not None else model_dir.eos_token_ids[0]


class ScriptedBackend(Backend):
    #: whether replies are cut at the request's `max_tokens` (as a sampler stops there); the context window
    #: always cuts them
    honours_max_tokens = True

    def __init__(self, script: str | Path | None, model_dir, policy: "_Policy | None" = None):
        from openforge.models import ModelDir

        self.model_dir = model_dir if isinstance(model_dir, ModelDir) else ModelDir(model_dir)
        self.script = Path(script) if script is not None else Path(type(policy).__name__)
        self._policy = policy if policy is not None else _load_policy(self.script)
        self._turns_taken: dict[str, int] = defaultdict(int)  # episode -> main-line calls served
        self._end_of_turn = end_of_turn_id(self.model_dir)

    @property
    def max_context(self) -> int:
        return self.model_dir.max_context

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, ctx: GenerationContext
    ) -> GenerationResult:
        self.check_request(prompt_ids, sampling)
        if ctx.side_call:
            text = self._policy.side(ctx.conversation, ctx.task)
        else:
            index = self._turns_taken[ctx.episode_id]
            self._turns_taken[ctx.episode_id] = index + 1
            text = self._policy.respond(ctx.conversation, index, ctx.task)
        if not isinstance(text, str):
            raise ScriptError(f"{self.script} returned {type(text).__name__}, not the reply text (str)")
        ids = self._encode(text)
        output, finish = _cut(ids, set(sampling.stop_token_ids) | set(self.model_dir.eos_token_ids))
        if self.honours_max_tokens:
            limit = clamp_max_tokens(len(prompt_ids), sampling, self.max_context)
        else:
            limit = max(0, self.max_context - len(prompt_ids))
        if len(output) > limit:
            output, finish = output[:limit], FinishReason.length
        return GenerationResult(
            output_ids=output,
            logprobs=[0.0] * len(output),
            finish_reason=finish,
            policy_version=self.policy_version,
        )

    def _encode(self, text: str) -> list[int]:
        encode = getattr(self.model_dir, "encode_completion", None)
        ids = encode(text) if encode else encode_completion(self.model_dir.tokenizer, text)
        if not ids or ids[-1] not in self.model_dir.eos_token_ids:
            ids.append(self._end_of_turn)
        return ids


def _cut(ids: list[int], stop_ids: set[int]) -> tuple[list[int], FinishReason]:
    """Up to and including the first stop token, as a sampler would have stopped there."""
    for i, tid in enumerate(ids):
        if tid in stop_ids:
            return ids[: i + 1], FinishReason.stop
    return ids, FinishReason.stop


class _Policy:
    def respond(self, conversation: Conversation | None, call_index: int, task) -> str:
        raise NotImplementedError

    def side(self, conversation: Conversation | None, task) -> str:
        return ""


class _TurnsPolicy(_Policy):
    def __init__(self, turns: list[str], side: str):
        self.turns, self.side_reply = turns, side

    def respond(self, conversation, call_index, task) -> str:
        return self.turns[min(call_index, len(self.turns) - 1)]

    def side(self, conversation, task) -> str:
        return self.side_reply


class _PythonPolicy(_Policy):
    def __init__(self, respond: Callable, respond_side: Callable | None):
        self._respond, self._respond_side = respond, respond_side
        self._wants_task = _accepts_task(respond)

    def respond(self, conversation, call_index, task) -> str:
        return (
            self._respond(conversation, call_index, task)
            if self._wants_task
            else self._respond(conversation, call_index)
        )

    def side(self, conversation, task) -> str:
        return self._respond_side(conversation) if self._respond_side else ""


def _accepts_task(fn: Callable) -> bool:
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
