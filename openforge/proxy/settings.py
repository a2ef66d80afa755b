"""How the proxy serves calls: `ProxySettings` (the one declaration of these options, with their defaults) and
`check_proxy_options`, which checks a run's `proxy_options` over them. Light on purpose: every config that runs
episodes reads the defaults here without importing the serving code (`service.py`)."""

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
