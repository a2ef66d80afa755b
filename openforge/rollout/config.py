"""What a rollout run is: tasks × harnesses × samples, where, with which model, and how to retry."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from openforge.faults import FaultSpec, parse_fault_spec
from openforge.proxy.service import check_proxy_options

# Tries per episode slot (only infrastructure failures are retried): `openforge rollout` / `eval` and
# `openforge train` alike.
DEFAULT_MAX_ATTEMPTS = 3


class RolloutConfig(BaseModel):
    """`openforge rollout` / `openforge eval` options (also usable from YAML).

    - `tasks`: task directories or roots holding them (Harbor layout); `split` keeps one split only.
    - `harnesses`: harness names (`react`, `claude-code`, `codex`, `openclaw`); several are mixed in one run.
    - `samples`: episodes per (task, harness); `concurrency`: episodes at once.
    - `max_attempts`: tries per episode slot; only infrastructure failures are retried.
    - `agent_timeout_s`: overrides every task's `[agent] timeout_sec` (wall clock of the harness).
    - `image_map`: base images that cannot be pulled here → local ones (`{"debian:bookworm-slim": ...}`).
    - `harness_options`: per-harness adapter options, e.g. `{"react": {"max_steps": 4}}`.
    - `max_new_tokens`: cap on tokens sampled per model call (the proxy's); also react's own per-reply cap
      unless `harness_options` sets its `max_tokens`.
    - `sandbox_options`: options of the sandbox backend, e.g. for `kubernetes`
      `{"namespace": "openforge", "harness_image": "registry/openforge-harnesses:TAG"}`.
    - `faults`: faults injected into the episodes' environments (`openforge.faults.spec`: a spec like
      `transient:0.3,missing_dir:0.2` or its mapping); recorded on each episode.
    - `proxy_options`: the run's proxy settings over their defaults (`openforge.proxy.service.ProxySettings`:
      `generation_timeout_s`, `header_timeout_s`, `body_timeout_s`, `max_connections`,
      `max_calls_in_flight_per_episode`, `stream_keepalive_s`, ...); keep `generation_timeout_s` below the agent
      timeout so that a stalled backend fails the call (an infrastructure failure) rather than the agent.
    - `proxy_listen`: where the run's proxy serves the model API over TCP (`127.0.0.1:0`: any free loopback
      port). Kubernetes pods reach it through a Service: in-cluster, `0.0.0.0:8100`.
    - `agent_user`: who the harness runs as in Docker and Kubernetes sandboxes: `root` (the image's user —
      root in Harbor images, which expect to install packages and edit system files; grading stays sound through
      the process stop and the tamper check) or `agent` (an unprivileged user, uid 1000, owning its home and the
      work directory). None: each task's `[agent] user`, else `root`. The local sandbox always runs the agent
      unprivileged.
    """

    model_config = ConfigDict(extra="forbid")

    tasks: list[Path] = Field(min_length=1)
    harnesses: list[str] = Field(default_factory=lambda: ["react"], min_length=1)
    sandbox: Literal["docker", "local", "kubernetes"] = "docker"
    sandbox_options: dict[str, Any] = Field(default_factory=dict)
    proxy_listen: str = "127.0.0.1:0"
    proxy_options: dict[str, Any] = Field(default_factory=dict)
    samples: int = Field(default=1, ge=1)
    concurrency: int = Field(default=4, ge=1)
    model: Path
    backend: str = "embedded"
    run: Path
    split: Literal["train", "heldout"] | None = None
    task_ids: list[str] | None = None
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1)
    agent_timeout_s: float | None = Field(default=None, gt=0)
    image_map: dict[str, str] = Field(default_factory=dict)
    harness_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    harness_bundle: Path | None = None
    temperature: float | None = Field(default=None, ge=0)
    max_new_tokens: int = Field(default=1024, ge=1)
    resume: bool = False
    step: int = 0  # training step the episodes belong to (GRPO groups are (step, task, harness))
    agent_user: Literal["root", "agent"] | None = None
    faults: FaultSpec | None = None

    @field_validator("faults", mode="before")
    @classmethod
    def _fault_spec(cls, v: Any) -> Any:
        return parse_fault_spec(v)

    @field_validator("proxy_options")
    @classmethod
    def _proxy_options(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_proxy_options(v)

    def adapter_options(self, harness: str) -> dict[str, Any]:
        """`harness_options[harness]`, with the run's `max_new_tokens` as the harness's own per-reply cap (react's
        `max_tokens`) unless those options set it: the run's cap must reach the harness, or a harness that asks
        for fewer tokens cuts replies short."""
        from openforge.harness import ADAPTERS

        options = dict(self.harness_options.get(harness, {}))
        cap = ADAPTERS[harness].reply_cap_option if harness in ADAPTERS else None
        if cap is not None:
            options.setdefault(cap, self.max_new_tokens)
        return options

    @field_validator("harnesses")
    @classmethod
    def _known_harnesses(cls, v: list[str]) -> list[str]:
        from openforge.harness import check_harness_names

        return check_harness_names(v)
