"""Shared helpers for the inference tests (no tests here): model directories built once per session, a
reference forward pass, and a real uvicorn server on a free loopback port."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
import time
from functools import cache
from pathlib import Path

import torch

from openforge.models import build_tiny_model


@cache
def tiny_model_dir() -> Path:
    """The tiny model (seed 0), built once per test session."""
    return build_tiny_model(Path(tempfile.mkdtemp(prefix="openforge-tiny-")) / "tiny", seed=0)


@cache
def perturbed_model_dir() -> Path:
    """The tiny model with every weight nudged: a second policy to load."""
    from safetensors.torch import load_file, save_file

    out = Path(tempfile.mkdtemp(prefix="openforge-tiny-perturbed-")) / "tiny"
    shutil.copytree(tiny_model_dir(), out)
    weights = out / "model.safetensors"
    state = load_file(str(weights))
    generator = torch.Generator().manual_seed(1)
    state = {k: v + 0.05 * torch.randn(v.shape, generator=generator, dtype=v.dtype) for k, v in state.items()}
    save_file(state, str(weights), metadata={"format": "pt"})
    return out


@cache
def sliding_window_model_dir(window: int = 16) -> Path:
    """The tiny model (seed 0) with sliding-window attention of `window` tokens in every layer."""
    from openforge.models import TinyModelSpec

    out = Path(tempfile.mkdtemp(prefix="openforge-tiny-window-")) / "tiny"
    return build_tiny_model(out, spec=TinyModelSpec(seed=0, sliding_window=window))


@cache
def short_context_model_dir(max_context: int = 64) -> Path:
    """The tiny model's weights with a context of `max_context` tokens (config edited), to test the limits."""
    out = Path(tempfile.mkdtemp(prefix="openforge-tiny-short-")) / "tiny"
    shutil.copytree(tiny_model_dir(), out)
    config = json.loads((out / "config.json").read_text())
    config["max_position_embeddings"] = max_context
    (out / "config.json").write_text(json.dumps(config))
    return out


def reference_logprobs(model, prompt: list[int], output: list[int], temperature: float) -> list[float]:
    """log softmax(logits / temperature) at each output token, from one full forward pass (no cache)."""
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prompt + output])).logits[0].float()
    logprobs = torch.log_softmax(logits / (temperature if temperature > 0 else 1.0), dim=-1)
    return [float(logprobs[len(prompt) - 1 + i, t]) for i, t in enumerate(output)]


def max_abs_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b), (len(a), len(b))
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


class ServerThread:
    """A real uvicorn server for `app` on a free 127.0.0.1 port, in a background thread."""

    def __init__(self, app):
        import uvicorn

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self._thread.join(30)
        self._socket.close()


def free_port() -> int:
    """A loopback port nothing listens on (for connection-refused tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
