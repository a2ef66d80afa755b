"""How a training run serves its policy and runs its episodes: the proxy (the embedded backend, whose
weights the run pushes in process), the orchestrator's settings, and the sandbox provider."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from openforge.proxy.server import ProxyConfig, RunningProxy, running_proxy
from openforge.rollout.config import RolloutConfig
from openforge.rollout.orchestrator import run_label
from openforge.rollout.settings import EpisodeSettings
from openforge.sandbox import SandboxProvider, get_provider
from openforge.train.config import TrainConfig
from openforge.train.context import RunContext

# The embedded backend as training uses it: many episodes' calls decoded in one batch, their shared prefixes
# cached.
EMBEDDED_OPTIONS = {"max_batch": 128, "prefix_cache_entries": 512}


def proxy_config(
    config: TrainConfig, model: Path, run: Path, temperature: float, socket_dir: Path, policy_version: int = 0
) -> ProxyConfig:
    return ProxyConfig(
        **config.proxy_settings(),
        model=model,
        backend="embedded",
        run=run,
        listen=config.proxy_listen,
        uds=socket_dir / "model.sock",
        admin_listen="127.0.0.1:0",
        temperature=temperature,
        backend_options={
            "seed": config.seed,
            **EMBEDDED_OPTIONS,
            **config.engine_options.backend_options("embedded"),
            # asynchronous GRPO: the calls of every step in flight decoded together (a wider batch amortises
            # the tiny model's per-step overhead, and no step's calls queue behind another's)
            "max_batch": max(
                EMBEDDED_OPTIONS["max_batch"], config.rl.prompts * config.rl.group * (config.rl.max_staleness + 1)
            ),
            "policy_version": policy_version,
        },
    )


@asynccontextmanager
async def serving(
    config: TrainConfig, model: Path, run: Path, temperature: float, policy_version: int = 0
) -> AsyncIterator[RunningProxy]:
    """A proxy serving `model` (TCP for in-process episodes, a Unix socket for sandboxes; a short socket path:
    AF_UNIX allows ~107 bytes). `policy_version`: the version `model` is."""
    socket_dir = Path(tempfile.mkdtemp(prefix="openforge-train-"))
    try:
        async with running_proxy(proxy_config(config, model, run, temperature, socket_dir, policy_version)) as proxy:
            yield proxy
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


def rollout_config(ctx: RunContext, **overrides: Any) -> RolloutConfig:
    """The orchestrator's settings for the run's sandboxed episodes (the teacher's, and GRPO's and the
    evaluations' when they do not run in process)."""
    c = ctx.config
    episodes = c.model_dump(include=set(EpisodeSettings.model_fields))
    fields = {
        **episodes,
        "sandbox": ctx.sandbox,
        "image_map": c.episode_image_map(),
        "tasks": list(c.tasks.dirs or [ctx.run / "tasks"]),
        "harnesses": c.harnesses,
        "model": ctx.model_path,
        "backend": "embedded",
        "run": ctx.run / "rl",
        "concurrency": c.rl.concurrency,
    }
    return RolloutConfig(**{**fields, **overrides})


@asynccontextmanager
async def sandboxes(ctx: RunContext, transfer: bool = False) -> AsyncIterator[SandboxProvider | None]:
    """The run's sandbox provider (None when every episode runs in process, `transfer` episodes aside); the
    run's leftover sandboxes are removed by label before and after."""
    if ctx.config.in_process_eval and not transfer:  # (implies in-process training)
        yield None
        return
    provider = get_provider(ctx.sandbox, **ctx.config.sandbox_options)
    label = run_label(ctx.run)
    try:
        await provider.cleanup(label)
        yield provider
    finally:
        try:
            await asyncio.shield(provider.cleanup(label))
        finally:
            await provider.close()
