"""`EpisodeSettings`: where and how an episode runs — its harness options and bundle, the sandbox, the image map,
who the agent runs as, its timeout, the token cap, retries, and the run's proxy. The one declaration of these
options and of their defaults.

Every config that runs episodes embeds it: `RolloutConfig` (`openforge rollout` / `eval`), `TrainConfig`
(`openforge train`, the quickstart) and `VerlLoopConfig` (veRL's agent loop) are subclasses, so its fields are
their own top-level keys (in YAML and on the command line), as a Go struct embeds another. What differs from one
batch of episodes to the next stays with the config that plans the batch: which tasks and harnesses, how many
samples, the sampling temperature, injected faults and the training step (a training run's teacher, GRPO and
evaluation episodes differ in them; in veRL the dataset rows and veRL's sampling parameters say them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from openforge.core.json_types import JSONObject
from openforge.proxy.settings import (
    DEFAULT_MAX_NEW_TOKENS,
    EngineOptions,
    ProxyOptions,
    RunProxyOptions,
    check_proxy_options,
)

# `auto`: Docker when a daemon can be started (and the offline base image built), else the local sandbox
# (`openforge.rollout.sandbox_choice`).
SandboxName = Literal["docker", "local", "kubernetes", "auto"]


def _known_harnesses(names: list[str]) -> list[str]:
    from openforge.harness import check_harness_names

    return check_harness_names(names)


# A list of harness names (`react`, `claude-code`, `codex`, `openclaw`): unknown ones are named with the known.
HarnessNames = Annotated[list[str], Field(min_length=1), AfterValidator(_known_harnesses)]


class EpisodeSettings(BaseModel):
    """- `harness_options`: per-harness adapter options, e.g. `{"react": {"max_steps": 4}}` (checked: an unknown
      harness or option is named).
    - `harness_bundle`: the pinned harness bundle (default: `openforge harness install`'s directory).
    - `sandbox`: `docker`, `local`, `kubernetes`, or `auto` (Docker when a daemon can be started, else local);
      `sandbox_options` go to the backend, e.g. for `kubernetes`
      `{"namespace": "openforge", "harness_image": "registry/openforge-harnesses:TAG"}`.
    - `image_map`: base images that cannot be pulled here → local ones (`{"debian:bookworm-slim": ...}`), over
      the task tree's own `image-map.yaml`.
    - `agent_user`: who the harness runs as in Docker and Kubernetes sandboxes: `root` (the image's user — root
      in Harbor images, which expect to install packages and edit system files; grading stays sound through
      the process stop and the tamper check) or `agent` (an unprivileged user, uid 1000, owning its home and
      the work directory). None: each task's `[agent] user`, else `root`. The local sandbox always runs the
      agent unprivileged.
    - `agent_timeout_s`: overrides every task's `[agent] timeout_sec` (wall clock of the harness).
    - `max_new_tokens`: cap on tokens sampled per model call (the proxy's), and the harness's own per-reply cap
      where it has one (`adapter_options`).
    - `max_attempts`: tries per episode; only infrastructure failures are retried.
    - `warm_sandboxes`: how many episodes' sandboxes (each with its grader) are started ahead of the episodes
      that will take them, at their tasks' initial state (`openforge.rollout.warm_pool`); 0 starts each
      episode's own when it begins. Each is used once and destroyed.
    - `proxy_listen`: where the run's proxy serves the model API over TCP (`127.0.0.1:0`: any free loopback
      port). Kubernetes pods reach it through a Service: in-cluster, `0.0.0.0:8100`.
    - `proxy_options`: the run's proxy settings over their defaults (`openforge.proxy.service.ProxySettings`:
      `generation_timeout_s`, `header_timeout_s`, `body_timeout_s`, `max_connections`,
      `max_calls_in_flight_per_episode`, `stream_keepalive_s`, ...); keep `generation_timeout_s` below the
      agent timeout so that a stalled backend fails the call (an infrastructure failure) rather than the agent.
    """

    model_config = ConfigDict(extra="forbid")

    harness_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    harness_bundle: Path | None = None
    sandbox: SandboxName = "docker"
    sandbox_options: dict[str, Any] = Field(default_factory=dict)
    image_map: dict[str, str] = Field(default_factory=dict)
    agent_user: Literal["root", "agent"] | None = None
    agent_timeout_s: float | None = Field(default=None, gt=0)
    max_new_tokens: int = Field(default=DEFAULT_MAX_NEW_TOKENS, ge=1)
    max_attempts: int = Field(default=3, ge=1)
    warm_sandboxes: int = Field(default=2, ge=0)
    proxy_listen: str = "127.0.0.1:0"
    proxy_options: ProxyOptions = Field(default_factory=lambda: ProxyOptions())

    @field_validator("proxy_options", mode="before")
    @classmethod
    def _proxy_options(cls, v: object) -> object:
        # before pydantic reads the mapping as ProxyOptions, which would drop an unknown key without a word
        return check_proxy_options(v) if isinstance(v, Mapping) else v

    @field_validator("harness_options")
    @classmethod
    def _known_options(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from openforge.harness import HarnessError, get_adapter

        for name, options in v.items():
            try:
                get_adapter(name, **options)
            except HarnessError as e:  # names the harness and the option
                raise ValueError(str(e)) from None
        return v

    def adapter_options(self, harness: str) -> JSONObject:
        """What reaches the harness's adapter: `harness_options[harness]`, with `max_new_tokens` as the harness's
        own per-reply cap (its `reply_cap_option`, react's `max_tokens`) unless those options set it — the run's
        cap must reach the harness, or a harness that asks for fewer tokens cuts replies the proxy allows."""
        from openforge.harness import ADAPTERS

        options = dict(self.harness_options.get(harness, {}))
        cap = ADAPTERS[harness].reply_cap_option if harness in ADAPTERS else None
        if cap is not None:
            options.setdefault(cap, self.max_new_tokens)
        return options

    def proxy_settings(self) -> RunProxyOptions:
        """What reaches the run's proxy (`ProxySettings` fields): `proxy_options` and the token cap. The
        temperature is the batch's (`RolloutConfig.temperature`, a training phase's)."""
        return {**self.proxy_options, "max_new_tokens": self.max_new_tokens}


class ServingSettings(BaseModel):
    """What serves a run's model calls when OpenForge serves them itself (`RolloutConfig`, `TrainConfig`):

    - `backend`: `embedded` (the model in this process, on the CPU), `vllm:URL`, `sglang:URL`, ...
      (`openforge.inference.SPEC_FORMS`).
    - `engine_options`: how the embedded backend runs the model (`EngineOptions`: cascade attention, oneDNN
      linears); an error with another backend.
    """

    backend: str = "embedded"
    engine_options: EngineOptions = Field(default_factory=EngineOptions)

    @model_validator(mode="after")
    def _engine_options_need_embedded(self) -> ServingSettings:
        self.engine_options.backend_options(self.backend)  # raises, naming the options, for another backend
        return self


class TaskValidationSettings(BaseModel):
    """Whether a run's tasks are checked against the reward-hack suite before any episode
    (`openforge.rollout.task_gate`; `RolloutConfig` and `TrainConfig` embed it as `EpisodeSettings`):

    - `validate_tasks`: run the built-in hack suite (`openforge tasks validate --run`'s) once per task directory,
      and once per generated family on a few of its instances, each verdict cached by the task's content (in
      `$OPENFORGE_HOME/task-validation`); a task whose verifier falls to a hack — or whose reference solution
      does not score 1, so that it cannot be checked — stops the run before it starts, with one message naming
      each such task and the hack it fell to (exit status 2). On for `openforge train`, off for `rollout` and
      `eval` (`--validate-tasks`).
    - `drop_hackable_tasks`: instead of stopping, leave those tasks (or families) out of the run and say so in
      its report.
    """

    model_config = ConfigDict(extra="forbid")

    validate_tasks: bool = False
    drop_hackable_tasks: bool = False
