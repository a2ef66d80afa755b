"""Inference backends: token ids in, token ids + log-probabilities out (see `base.Backend`).

`make_backend(spec, model_dir)` builds one from a short spec:

- `embedded`          the model in-process (transformers, CPU)
- `vllm:URL`          a vLLM OpenAI-compatible server, e.g. `vllm:http://gpu-node:8000`
- `sglang:URL`        an SGLang server, e.g. `sglang:http://gpu-node:30000`
- `scripted:FILE`     a scripted policy: a JSON file of turns or a Python file defining respond()
- `oracle`            the teacher: each task's reference solution through the harness's shell tool
- `openai:URL`        a model behind an OpenAI-compatible Chat Completions API (`URL` = its /v1 base URL)
- `anthropic:URL`     a model behind the Anthropic Messages API
The last two answer in messages, not token ids (`message.MessageBackend`, `upstream.py`).

Heavy modules (torch, transformers) are imported only by the backends that need them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from openforge.inference.base import (
    Backend,
    BackendError,
    BackendSpecError,
    GenerationContext,
    GenerationResult,
    InvalidRequestError,
    PromptTooLongError,
    SampledToken,
    check_token_ids,
    clamp_max_tokens,
    parse_sampling,
)
from openforge.inference.message import MESSAGE_LEVEL, MessageBackend, MessageResult

if TYPE_CHECKING:
    from openforge.models import ModelDir

SPEC_FORMS = "embedded, vllm:URL, sglang:URL, scripted:FILE, oracle, openai:URL, anthropic:URL"
MESSAGE_LEVEL_KINDS = ("openai", "anthropic")


def make_backend(spec: str, model_dir: str | Path | ModelDir | None = None, **given: object) -> Backend:
    """A backend from `spec` (one of SPEC_FORMS). `model_dir` (a path or ModelDir) is needed by `embedded`
    and `scripted` and gives the remote ones their default context length. `given` options go to the backend's
    constructor (e.g. seed=0 for embedded, timeout=60 for vllm), which checks them."""
    options: dict[str, Any] = dict(given)  # passed through: each backend's constructor names its own
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "embedded" and not arg:
        from openforge.inference.embedded import EmbeddedBackend

        return EmbeddedBackend(_require(model_dir, spec), **options)
    if kind in ("vllm", "sglang") and arg.startswith(("http://", "https://")):
        options.setdefault("max_context", _max_context(model_dir))
        if kind == "vllm":
            from openforge.inference.vllm import VLLMBackend

            return VLLMBackend(arg, **options)
        from openforge.inference.sglang import SGLangBackend

        return SGLangBackend(arg, **options)
    if kind in MESSAGE_LEVEL_KINDS and arg.startswith(("http://", "https://")):
        from openforge.inference.upstream import UpstreamBackend

        return UpstreamBackend(kind, arg, **options)
    if kind == "oracle" and not arg:
        from openforge.inference.oracle import OracleBackend

        return OracleBackend(_require(model_dir, spec))
    if kind == "scripted" and arg:
        from openforge.inference.scripted import ScriptedBackend

        return ScriptedBackend(Path(arg), _require(model_dir, spec), **options)
    raise BackendSpecError(f"backend {spec!r} is not understood; use one of: {SPEC_FORMS}")


def is_message_level(spec: str) -> bool:
    """Whether `spec` names a backend that answers in messages (a model behind an API), not token ids."""
    return spec.partition(":")[0].strip().lower() in MESSAGE_LEVEL_KINDS


def _require(model_dir: str | Path | ModelDir | None, spec: str) -> str | Path | ModelDir:
    if model_dir is None:
        raise BackendSpecError(f"backend {spec!r} needs a model directory (--model)")
    return model_dir


def _max_context(model_dir: str | Path | ModelDir | None) -> int | None:
    if model_dir is None:
        return None
    if isinstance(model_dir, str | Path):
        from openforge.models import ModelDir

        model_dir = ModelDir(model_dir)
    return model_dir.max_context


__all__ = [
    "SPEC_FORMS",
    "Backend",
    "BackendError",
    "BackendSpecError",
    "GenerationContext",
    "GenerationResult",
    "InvalidRequestError",
    "MESSAGE_LEVEL",
    "MessageBackend",
    "MessageResult",
    "PromptTooLongError",
    "SampledToken",
    "check_token_ids",
    "clamp_max_tokens",
    "is_message_level",
    "make_backend",
    "parse_sampling",
]
