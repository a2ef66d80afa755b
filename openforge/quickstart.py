"""`openforge quickstart`, the README's main job.

For now it exercises the foundation end to end on the embedded defaults: build the tiny model, serve it
with `serve-model`, make one chat call through the `vllm` client (token ids in, ids + logprobs out), record
the call in the run's trajectory store, and print it. The full pipeline (teacher trajectories through a
real harness, SFT, GRPO, held-out evaluation) replaces this as later milestones land.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

from openforge.core import CallRecord, Conversation, Episode, EpisodeState, Message, SamplingParams, ToolSpec
from openforge.inference import GenerationContext
from openforge.models import ModelDir, build_tiny_model


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _BackgroundServer:
    """serve-model's app on a loopback port, in a thread, for the length of a `with` block."""

    def __init__(self, model_dir: Path, seed: int):
        import uvicorn

        from openforge.inference.embedded import EmbeddedBackend
        from openforge.inference.serve import create_app

        self.port = _free_port()
        app = create_app(EmbeddedBackend(model_dir, seed=seed))
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("serve-model did not start")
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def run_quickstart(run_dir: Path, seed: int = 0, console: Console | None = None) -> CallRecord:
    from openforge.inference.vllm import VLLMBackend
    from openforge.store import TrajectoryStore

    console = console or Console()
    run_dir = Path(run_dir)
    model_path = run_dir / "model"
    with console.status("building the tiny model"):
        if not (model_path / "config.json").is_file():
            build_tiny_model(model_path, seed=seed)
        model = ModelDir(model_path)
    console.print(f"[green]✓[/] tiny model at {model_path} (vocab {model.vocab_size}, context {model.max_context})")

    conversation = Conversation(
        system="You are a shell agent.",
        tools=[ToolSpec(name="bash", description="Run a shell command.",
                        parameters={"type": "object", "properties": {"command": {"type": "string"}}})],
        messages=[Message(role="user", content="Create notes/a7.txt containing 'blue 42'.")],
        sampling=SamplingParams(temperature=1.0, max_tokens=48, seed=seed),
    )
    prompt_ids = model.render(conversation)

    with _BackgroundServer(model_path, seed) as url, TrajectoryStore.open(run_dir) as store:
        console.print(f"[green]✓[/] serve-model listening at {url}")
        episode = store.create_episode(Episode(id=uuid.uuid4().hex, key=uuid.uuid4().hex, task="quickstart-demo",
                                               harness="none", state=EpisodeState.running))

        async def one_call():
            backend = VLLMBackend(url)
            try:
                await backend.connect()
                return await backend.generate(prompt_ids, conversation.sampling,
                                              GenerationContext(episode_id=episode.id, conversation=conversation))
            finally:
                await backend.close()

        started = time.time()
        result = asyncio.run(one_call())
        record = CallRecord(
            episode_id=episode.id, index=0, prompt_ids=prompt_ids, output_ids=result.output_ids,
            output_logprobs=result.logprobs, sampling=conversation.sampling, finish_reason=result.finish_reason,
            policy_version=result.policy_version, started_at=started, finished_at=time.time(),
            dialect="vllm_completions",
        )
        store.add_call(record)
        store.update_episode(episode.id, state=EpisodeState.ended, ended_at=time.time())

    table = Table(title="one recorded call", show_header=False)
    table.add_row("prompt tokens", str(len(prompt_ids)))
    table.add_row("sampled tokens", str(len(result.output_ids)))
    table.add_row("finish reason", result.finish_reason.value)
    table.add_row("mean logprob", f"{sum(result.logprobs) / max(1, len(result.logprobs)):.3f}")
    table.add_row("sampled text (untrained model)", repr(model.decode(result.output_ids))[:120])
    table.add_row("store", str(run_dir / "trajectories.db"))
    console.print(table)
    return record
