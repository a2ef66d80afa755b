"""OpenForge episodes as the rollout source of TRL's `GRPOTrainer` (TRL 1.16: `rollout_func`).

    from trl import GRPOConfig, GRPOTrainer
    from openforge.integrations.trl import OpenForgeRollout, openforge_reward, task_dataset
    from openforge.rollout import RolloutConfig

    config = RolloutConfig(tasks=[TASKS], harnesses=["react"], sandbox="local", model=MODEL, run=RUN)
    with OpenForgeRollout(config) as rollout:
        trainer = GRPOTrainer(model=str(MODEL), reward_funcs=openforge_reward, args=GRPOConfig(...),
                              train_dataset=task_dataset(task_ids), rollout_func=rollout)
        trainer.train()

The dataset's `prompt` column holds task ids. TRL calls `rollout(prompts, trainer)` with each prompt repeated
`num_generations` times in a row (a GRPO group); the rollout runs one episode per slot through the
orchestrator's episode runner (`run_slots`: the harness in its own sandbox, graded by the task's verifier,
infrastructure failures retried), against one proxy kept for the whole run, and returns the recorded calls as
TRL's rows (`trl_rows.py`: prompt ids, completion ids, behaviour logprobs, `env_mask` keeping tool output out
of the loss, the verifier's reward for `openforge_reward`).

The policy the episodes sample from is the one being trained:

- `backend: embedded` (CPU, small models): before each batch whose trainer step is new, the trainer's weights
  are saved and pushed into the proxy's engine (pause → load → resume: `train.weights_sync`); the new policy
  version is recorded on every call;
- `backend: vllm:URL` pointing at TRL's vLLM server (`trl vllm-serve`, vLLM's own OpenAI server with processed
  logprobs): TRL pushes the weights itself before calling the rollout (`GRPOConfig(use_vllm=True,
  vllm_mode="server")`), and the proxy records the trainer's global step as the policy version;
- `scripted:` / `oracle:` backends: a fixed policy (tests), nothing to push.

The proxy samples every call at `GRPOConfig.temperature` and `top_p` (TRL scores the completions at that
temperature), and `RolloutConfig.samples` is not used: TRL's `num_generations` is the group size.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console

from openforge.core.errors import ConfigurationError
from openforge.core.runlock import locked_run_dir
from openforge.core.signals import sigterm_as_ctrl_c
from openforge.integrations.trl_rows import BatchStats, EpisodeRows, episode_rows, pack_groups, trl_columns
from openforge.models import ModelDir
from openforge.proxy.server import ProxyConfig, RunningProxy, running_proxy
from openforge.rollout.config import RolloutConfig
from openforge.rollout.episode import Slot
from openforge.rollout.orchestrator import RolloutSummary, run_label, run_slots, select_tasks
from openforge.rollout.preflight import check_images, effective_image_map
from openforge.rollout.sandbox_choice import choose_sandbox
from openforge.sandbox import SandboxProvider, get_provider
from openforge.tasks import Task
from openforge.train.checkpoint import save_checkpoint
from openforge.train.serving import EMBEDDED_OPTIONS
from openforge.train.stored import stored_episode
from openforge.train.weights_sync import push_weights_in_process

if TYPE_CHECKING:
    from datasets import Dataset

log = logging.getLogger(__name__)
T = TypeVar("T")
REMOTE_BACKENDS = ("vllm:", "sglang:")


class TRLRolloutError(ConfigurationError, ValueError):
    """The TRL rollout cannot run as configured (the message names the field and the fix)."""


class OpenForgeRollout:
    """TRL's `rollout_func`: call it as `rollout(prompts, trainer)`. Use it as a context manager (or call
    `close()`): the proxy, the sandbox provider and the run directory's lock live from the first batch until
    then. `history`: every batch's `BatchStats`."""

    def __init__(self, config: RolloutConfig, *, console: Console | None = None):
        if len(config.harnesses) != 1:
            raise TRLRolloutError(
                f"harnesses: the TRL rollout runs one harness per trainer (a GRPO group is one task in one "
                f"harness), got {config.harnesses}: run one trainer per harness"
            )
        self.config = config
        self.harness = config.harnesses[0]
        self.console = console or Console(stderr=True)
        self.history: list[BatchStats] = []
        self.tasks: dict[str, Task] = {}
        self.policy_version = 0
        self._synced_step: int | None = None
        self._batches = 0
        self._samples = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock: contextlib.ExitStack | None = None
        self._proxy: RunningProxy | None = None
        self._provider: SandboxProvider | None = None
        self._scratch: Path | None = None
        self._blank = ModelDir(config.model).eos_token_ids[0]

    # ---- TRL's entry point --------------------------------------------------------------------------------

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        started = time.monotonic()
        size = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        if self._proxy is None:
            self._start(float(trainer.args.temperature), float(trainer.args.top_p))
        self._check_sampling(float(trainer.args.temperature), float(trainer.args.top_p))
        groups = self._groups(prompts, size)
        version = self._sync(trainer)
        slots = [
            Slot(task, self.harness, self._samples + i) for i, task in enumerate(t for t in groups for _ in range(size))
        ]
        self._samples += len(slots)
        summary = self._run(self._episodes(slots))
        if summary.interrupted:
            raise KeyboardInterrupt
        by_slot = self._episode_rows(summary)
        grouped = [[by_slot[s.key] for s in slots[g * size : (g + 1) * size]] for g in range(len(groups))]
        packed = pack_groups(grouped, size, self._blank)
        stats = packed.stats
        stats.step, stats.policy_version = int(trainer.state.global_step), version
        stats.outcomes = dict(summary.outcomes)
        stats.seconds = round(time.monotonic() - started, 2)
        self.history.append(stats)
        self._batches += 1
        log.info("openforge rollout: %s", stats.model_dump_json())
        return {**trl_columns(packed.rows), "openforge_stats": stats.model_dump(mode="json")}

    def pass_rates(
        self, task_ids: list[str], samples: int, *, temperature: float, top_p: float = 1.0
    ) -> dict[str, float]:
        """Each task's pass rate over `samples` episodes of the policy served now (before training: the starting
        policy), sampled as TRL's batches will be — to choose the tasks GRPO can learn from: a group whose episodes
        all pass or all fail has zero advantage and teaches nothing. Infrastructure failures are not counted."""
        if self._proxy is None:
            self._start(temperature, top_p)
        self._check_sampling(temperature, top_p)
        unknown = [t for t in task_ids if t not in self.tasks]
        if unknown:
            raise TRLRolloutError(f"{unknown[:3]} are no tasks of tasks={[str(p) for p in self.config.tasks]}")
        slots = [
            Slot(self.tasks[t], self.harness, self._samples + i)
            for i, t in enumerate(t for t in task_ids for _ in range(samples))
        ]
        self._samples += len(slots)
        summary = self._run(self._episodes(slots))
        if summary.interrupted:
            raise KeyboardInterrupt
        assert self._proxy is not None
        graded: dict[str, list[float]] = {t: [] for t in task_ids}
        for episode_id in summary.episode_ids:
            episode = stored_episode(self._proxy.store, episode_id)
            if episode.reward is not None and not (episode.outcome and episode.outcome.is_infrastructure_failure):
                graded[episode.task or ""].append(float(episode.reward >= 1.0))
        return {t: sum(r) / len(r) for t, r in graded.items() if r}

    def _groups(self, prompts: list[Any], size: int) -> list[Task]:
        """The task of each GRPO group: TRL repeats each prompt `size` times in a row."""
        if len(prompts) % size:
            raise TRLRolloutError(
                f"TRL passed {len(prompts)} prompts, not whole groups of num_generations={size}: make each "
                "process's generation batch a multiple of num_generations"
            )
        groups = []
        for start in range(0, len(prompts), size):
            chunk = prompts[start : start + size]
            if not isinstance(chunk[0], str) or any(p != chunk[0] for p in chunk):
                raise TRLRolloutError(
                    f"prompts {start}..{start + size - 1} are not one task id repeated num_generations times "
                    f"({chunk[:2]!r}...): the dataset's `prompt` column must hold task ids (task_dataset())"
                )
            task = self.tasks.get(chunk[0])
            if task is None:
                raise TRLRolloutError(f"prompt {chunk[0]!r} is no task of tasks={[str(p) for p in self.config.tasks]}")
            groups.append(task)
        return groups

    # ---- weights -------------------------------------------------------------------------------------------

    def _sync(self, trainer: Any) -> int:
        """The trained policy into the serving backend when the trainer's step moved; returns the version the
        batch samples from."""
        step = int(trainer.state.global_step)
        backend = self.config.backend
        if backend.startswith(REMOTE_BACKENDS):
            if not getattr(trainer, "use_vllm", False):
                raise TRLRolloutError(
                    f"backend: {backend} would never receive the trainer's weights: with TRL's vLLM server set "
                    "GRPOConfig(use_vllm=True, vllm_mode='server') so that TRL pushes them before each batch"
                )
            self.policy_version = step  # TRL synced its server for this step before calling the rollout
            self._run(self._set_remote_version(step))
        elif backend == "embedded" and step != self._synced_step:
            model = trainer.accelerator.unwrap_model(trainer.model)
            if hasattr(model, "peft_config"):
                raise TRLRolloutError(
                    "backend: embedded loads whole model weights, and the trainer trains a PEFT adapter: merge it "
                    "or serve the policy with TRL's vLLM server (backend: vllm:URL, GRPOConfig(use_vllm=True))"
                )
            assert self._scratch is not None and self._proxy is not None
            checkpoint = save_checkpoint(model, self.config.model, self._scratch / "policy")
            self.policy_version = self._run(push_weights_in_process(self._proxy, checkpoint))
            self._synced_step = step
        return self.policy_version

    async def _set_remote_version(self, version: int) -> None:
        assert self._proxy is not None
        self._proxy.service.backend.policy_version = version

    # ---- episodes ------------------------------------------------------------------------------------------

    async def _episodes(self, slots: list[Slot]) -> RolloutSummary:
        assert self._proxy is not None and self._provider is not None
        config = self.config.model_copy(update={"step": self._batches})
        label = run_label(self.config.run)
        return await run_slots(self._proxy, self._provider, config, slots, label, self.console)

    def _episode_rows(self, summary: RolloutSummary) -> dict[str, EpisodeRows]:
        assert self._proxy is not None
        store = self._proxy.store
        out = {}
        for episode_id in summary.episode_ids:
            episode = stored_episode(store, episode_id)
            out[episode.metadata["slot"]] = episode_rows(
                episode, store.list_calls(episode_id), self._blank, self._batches
            )
        return out

    # ---- the proxy, the sandboxes and their event loop -----------------------------------------------------

    def _check_sampling(self, temperature: float, top_p: float) -> None:
        """The episodes sample as TRL scores them: one temperature and top_p for the rollout's whole life (the
        first call — a batch or a screening — fixes them on the proxy)."""
        config = self.config
        for name, ours, theirs in (("temperature", config.temperature, temperature), ("top_p", config.top_p, top_p)):
            if ours is not None and ours != theirs:
                raise TRLRolloutError(
                    f"{name}: the episodes sample with {ours} and this call asks for {theirs} (GRPOConfig.{name}): "
                    f"set one value (or leave RolloutConfig.{name} unset)"
                )

    def _start(self, temperature: float, top_p: float) -> None:
        self._check_sampling(temperature, top_p)
        config = self.config
        self.tasks = {t.id: t for t in select_tasks(config)}
        image_map, _ = effective_image_map(config.tasks, config.image_map)
        update = {"image_map": image_map.to_dict(), "temperature": temperature, "top_p": top_p}
        self.config = config.model_copy(update=update)
        self._lock = contextlib.ExitStack()
        self._lock.enter_context(locked_run_dir(config.run))
        # a `kill` of the training script unwinds through close() as Ctrl-C does: no sandbox is left running
        self._lock.enter_context(sigterm_as_ctrl_c())
        self._scratch = Path(tempfile.mkdtemp(prefix="openforge-trl-"))  # short: AF_UNIX paths are ~107 bytes
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="openforge-rollout", daemon=True)
        self._thread.start()
        try:
            self._run(self._open(image_map))
        except BaseException:
            self.close()
            raise

    async def _open(self, image_map: Any) -> None:
        config, stack = self.config, contextlib.AsyncExitStack()
        self._stack = stack
        assert self._scratch is not None
        sandbox = choose_sandbox(config.sandbox, self.console)
        provider = get_provider(sandbox, **config.sandbox_options)
        stack.push_async_callback(provider.close)
        label = run_label(config.run)
        stack.push_async_callback(provider.cleanup, label)
        await check_images(list(self.tasks.values()), image_map, provider)
        await provider.cleanup(label)
        self._provider = provider
        options = EMBEDDED_OPTIONS if config.backend == "embedded" else {}
        proxy_config = ProxyConfig(
            **config.proxy_settings(),
            model=config.model,
            backend=config.backend,
            backend_options=dict(options),
            run=config.run,
            listen=config.proxy_listen,
            uds=self._scratch / "model.sock",
            admin_listen="127.0.0.1:0",
            temperature=config.temperature,
            top_p=config.top_p,
        )
        self._proxy = await stack.enter_async_context(running_proxy(proxy_config))
        self._proxy.store.set_run_info({"rollout": config.model_dump(mode="json"), "trainer": "trl"})

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the rollout's event loop and wait; Ctrl-C here cancels it there (its episodes clean up)."""
        assert self._loop is not None
        tasks: list[asyncio.Task[Any]] = []

        async def tracked() -> T:
            tasks.append(asyncio.current_task())  # type: ignore[arg-type]
            return await coro

        future = asyncio.run_coroutine_threadsafe(tracked(), self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # the future is cancelled at once; its task goes on unwinding (removing sandboxes):
            if tasks:  # wait for the task itself, or close() would stop the loop under its clean-up
                with contextlib.suppress(BaseException):
                    asyncio.run_coroutine_threadsafe(asyncio.wait(tasks, timeout=60), self._loop).result(timeout=70)
            raise

    def close(self) -> None:
        """Stop the proxy, remove the run's sandboxes, release the run directory."""
        if self._loop is not None:
            if self._stack is not None:
                with contextlib.suppress(Exception):
                    self._run(self._stack.aclose())
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=30)
            self._loop.close()
        if self._lock is not None:
            self._lock.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        self._loop = self._thread = self._stack = self._lock = self._proxy = self._provider = self._scratch = None

    def __enter__(self) -> OpenForgeRollout:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def openforge_reward(
    prompts: list[Any],
    completions: list[Any],
    openforge_reward: list[float | None],
    openforge_stats: list[dict[str, Any]] | None = None,
    log_metric: Any = None,
    **_: Any,
) -> list[float | None]:
    """TRL's reward function for `OpenForgeRollout`: each row's reward from the task's verifier (None for a
    blank row, which TRL then leaves out of its group's baseline). Logs the batch's counts as metrics
    (`openforge/...`) through TRL's `log_metric`."""
    if log_metric is not None and openforge_stats:
        for key, value in openforge_stats[0].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                log_metric(f"openforge/{key}", float(value))
    return list(openforge_reward)


def learnable_pool(rates: dict[str, float], size: int) -> list[str]:
    """Up to `size` of the tasks whose pass rate (`OpenForgeRollout.pass_rates`) is strictly between 0 and 1,
    those nearest an even chance first: their groups have the most reward variance, where a task always or never
    solved gives all-zero advantages."""
    learnable = [t for t, r in rates.items() if 0.0 < r < 1.0]
    return sorted(learnable, key=lambda t: (abs(rates[t] - 0.5), t))[:size]


def task_dataset(task_ids: list[str]) -> Dataset:
    """A TRL training dataset whose `prompt` column holds task ids."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": list(task_ids)})


__all__ = ["OpenForgeRollout", "TRLRolloutError", "learnable_pool", "openforge_reward", "task_dataset"]
