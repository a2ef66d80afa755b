"""How the proxy serves calls: `ProxySettings` (the one declaration of these options, with their defaults) and
`check_proxy_options`, which checks a run's `proxy_options` over them; `EngineOptions`, how its embedded backend
runs the model. Light on purpose: every config that runs episodes reads the defaults here without importing the
serving code (`service.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict  # pydantic reads it as a field type only from here on Python < 3.12

# Tokens sampled per call at most: harnesses ask for 32000, a cap keeps a rambling policy bounded. The proxy's
# default and every run's (`openforge.rollout.settings.EpisodeSettings.max_new_tokens`).
DEFAULT_MAX_NEW_TOKENS = 4096


class ProxySettings(BaseModel):
    """How the proxy serves calls. The one declaration of these options: `ProxyConfig` (the CLI's and every
    in-process proxy's configuration) extends it with where to listen and what to serve."""

    model_config = ConfigDict(extra="forbid")

    served_model: str | None = None  # the model name reported to harnesses; None: the model directory's name
    max_new_tokens: int = Field(default=DEFAULT_MAX_NEW_TOKENS, ge=1)
    generation_timeout_s: float = Field(default=600.0, gt=0)
    temperature: float | None = Field(default=None, ge=0.0)  # sample every call at this temperature (training)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)  # and with this nucleus mass (None: as requested)
    max_body_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    # One decoded image (a screenshot) at most; a larger one is refused with a 413 naming it. OpenAI's limit
    # per image; Anthropic's API takes 5 MB.
    max_image_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    # No harness session comes near this; a request past it is hostile or broken, and rendering it would
    # only burn CPU before failing on the context length.
    max_messages: int = Field(default=4096, ge=1)
    replay_cache_per_episode: int = Field(default=4, ge=0)
    # Claude Code runs sub-agents in parallel; more than this at once from one episode is a runaway harness.
    max_calls_in_flight_per_episode: int = Field(default=16, ge=1)
    # A streamed reply's first events go out with its first token, or after this long without one (then
    # keep-alives every `stream_keepalive_s`): a call that fails at once still gets its HTTP error status.
    stream_start_s: float = Field(default=0.5, ge=0)
    stream_keepalive_s: float = Field(default=5.0, gt=0)
    # Connections (`limits.py`): headers must arrive within `header_timeout_s` of a connection opening (or of
    # a request's first byte), a body within `body_timeout_s` of its headers; each listener holds at most
    # `max_connections` connections.
    header_timeout_s: float = Field(default=30.0, gt=0)
    body_timeout_s: float = Field(default=60.0, gt=0)
    max_connections: int = Field(default=1024, ge=1)

    def sampling_overrides(self) -> dict[str, float]:
        """What the run sets on every call whatever the harness asks: its temperature and top_p, where set."""
        overrides = {"temperature": self.temperature, "top_p": self.top_p}
        return {k: v for k, v in overrides.items() if v is not None}


# What a run sets on its proxy itself (from its own options): not overridable through `proxy_options`.
RUN_OWNED_SETTINGS = frozenset({"max_new_tokens", "temperature", "top_p"})


class ProxyOptions(TypedDict, total=False):
    """A run's `proxy_options` as keyword arguments (`ProxyConfig(**options, model=...)`): `ProxySettings`'
    fields but the run's own (`RUN_OWNED_SETTINGS`). tests/proxy/test_proxy_options.py keeps them the same."""

    served_model: str | None
    generation_timeout_s: float
    max_body_bytes: int
    max_image_bytes: int
    max_messages: int
    replay_cache_per_episode: int
    max_calls_in_flight_per_episode: int
    stream_start_s: float
    stream_keepalive_s: float
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int


class RunProxyOptions(ProxyOptions):
    """What a run gives its proxy: its `proxy_options` and its token cap (the temperature is the batch's)."""

    max_new_tokens: int


def check_proxy_options(options: Mapping[str, object]) -> ProxyOptions:
    """A run's `proxy_options` (ProxySettings fields over the defaults, e.g. `generation_timeout_s`), checked
    and converted; ValueError naming the unknown or run-owned keys, or the bad value."""
    owned = sorted(RUN_OWNED_SETTINGS & set(options))
    if owned:
        raise ValueError(
            f"{', '.join(owned)}: set with the run's own option (max_new_tokens, temperature, top_p), not in "
            "proxy_options"
        )
    unknown = sorted(set(options) - set(ProxySettings.model_fields))
    if unknown:
        known = ", ".join(sorted(set(ProxySettings.model_fields) - RUN_OWNED_SETTINGS))
        raise ValueError(f"unknown proxy option(s) {', '.join(unknown)}; known: {known}")
    checked = ProxySettings.model_validate(options)  # pydantic's message names the field and the bound
    return cast(ProxyOptions, checked.model_dump(include=set(options)))  # model_dump is typed dict[str, Any]


__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "RUN_OWNED_SETTINGS",
    "ProxyOptions",
    "ProxySettings",
    "RunProxyOptions",
    "check_proxy_options",
]


# How the embedded backend runs a model on the CPU (`engine_options`, `--engine-option KEY=VALUE`). All off by
# default: each changes the arithmetic's order or precision. The float32 two help a real model behind a long shared
# prompt (benchmarks/engine_shared_prompt.py, 1.85x) and its Claude Code episodes (engine_options_episodes.py,
# 1.08x), cost the tiny model's engine nothing and gain its quickstart nothing (docs/inference.md); the
# real-model recipe turns them on.
class EngineOptions(BaseModel):
    """- `cascade_attention`: the prefix that all rows of a batch share (a harness's system prompt, a GRPO
      group's prompt) is kept once and read once per step and per prompt read, beside each row's own tokens
      (`openforge/inference/cascade.py`; plain-attention models only, others ignore it). Exact up to rounding.
    - `onednn_linears`: linear layers through oneDNN with weights packed once
      (`openforge/inference/cpu_linear.py`); float32, exact up to rounding. Layers below ~10^5 weights stay on
      torch's default path, which is faster for them.
    - `bf16_linears`: the same with bfloat16 weights and inputs: half the memory read per decode step; logits
      and the logprobs recorded for training differ from float32 by bfloat16's rounding (~1e-2)."""

    model_config = ConfigDict(extra="forbid")

    cascade_attention: bool = False
    onednn_linears: bool = False
    bf16_linears: bool = False

    def backend_options(self, backend: str) -> dict[str, bool]:
        """The embedded backend's keyword arguments; for another backend, none (and a set option is an error)."""
        chosen = self.model_dump(exclude_defaults=True)
        if backend.split(":", 1)[0] == "embedded":
            return chosen
        if chosen:
            raise ValueError(
                f"engine_options {sorted(chosen)} apply to the embedded backend only (backend is {backend!r}): "
                "drop them, or serve with backend: embedded"
            )
        return {}
