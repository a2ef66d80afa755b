"""New weights to the serving backend, through the proxy: pause → load → resume.

Pausing first (`POST /admin/pause` returns once calls in flight have finished; new calls wait, they do not
fail) means every call is served wholly by one policy version and the swap is never seen half-done. Resume
is sent whatever happened in between: a failed load must not leave every harness hanging on a paused proxy.

    version = push_weights(admin_url, admin_token, "runs/x/checkpoints/step-000010")     # over HTTP
    version = await apush_weights(admin_url, admin_token, checkpoint_dir)                  # same, async
    version = await push_weights_in_process(running_proxy, checkpoint_dir)                 # same process

Asynchronous GRPO pushes without waiting (`WeightPusher`): the embedded engine applies a swap once the generations
it has started end, serving later steps meanwhile, so the trainer goes on with the next update.

The path is read by the proxy's backend, so it must name the directory as the proxy's machine sees it.
`adapter=True`: the path is a LoRA adapter in PEFT's format, which a vLLM or SGLang backend loads through its
LoRA-loading API (`Backend.load_adapter`); the embedded engine takes merged weights instead (a LoRA run's
checkpoints carry both: `checkpoint.save_checkpoint(merged=True)`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from openforge.core.errors import ModelError

if TYPE_CHECKING:
    from openforge.proxy.server import RunningProxy

# Pausing waits for calls in flight to finish, which can take as long as the longest generation.
DEFAULT_TIMEOUT_S = 900.0


class WeightSyncError(ModelError, RuntimeError):
    """The weights could not be pushed; the message says which stage failed and whether the proxy resumed."""


def _client_args(admin_url: str, admin_token: str, timeout_s: float) -> tuple[dict, dict]:
    """httpx client kwargs for an admin URL (`http://host:port` or `unix:/path/to/admin.sock`) and the
    transport kwargs (Unix socket)."""
    headers = {"authorization": f"Bearer {admin_token}"}
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    if admin_url.startswith("unix:"):
        return {"base_url": "http://proxy", "headers": headers, "timeout": timeout}, {"uds": admin_url[5:]}
    return {"base_url": admin_url.rstrip("/"), "headers": headers, "timeout": timeout}, {}


def _error_text(response: httpx.Response) -> str:
    try:
        return str(response.json().get("error") or response.text)
    except ValueError:
        return response.text[:500]


def _checked(response: httpx.Response, stage: str) -> dict:
    if response.status_code != 200:
        raise WeightSyncError(f"{stage} failed: HTTP {response.status_code}: {_error_text(response)}")
    return response.json()


def _load_body(path: str, adapter: bool) -> dict:
    return {"path": path, "adapter": True} if adapter else {"path": path}


def _version(data: dict, path: str) -> int:
    version = data.get("policy_version")
    if not isinstance(version, int):
        raise WeightSyncError(f"loading {path} answered no policy_version: {data}")
    return version


def _finish(version: int | None, failure: BaseException | None, resume_failure: BaseException | None) -> int:
    if resume_failure is not None:
        state = f"loading had failed too ({failure}); " if failure else ""
        raise WeightSyncError(f"{state}resume failed, the proxy may still be paused: {resume_failure}") from (
            failure or resume_failure
        )
    if failure is not None:
        if isinstance(failure, WeightSyncError):
            raise WeightSyncError(f"{failure} (the proxy was resumed on the old weights)") from failure
        raise WeightSyncError(
            f"pushing weights failed ({type(failure).__name__}: {failure}); the proxy was resumed on the old weights"
        ) from failure
    assert version is not None
    return version


def push_weights(
    admin_url: str,
    admin_token: str,
    checkpoint_dir: str | Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    adapter: bool = False,
) -> int:
    """Pause the proxy, load `checkpoint_dir` into its backend, resume; return the new policy version."""
    path = str(checkpoint_dir)
    client_kwargs, transport_kwargs = _client_args(admin_url, admin_token, timeout_s)
    transport = httpx.HTTPTransport(**transport_kwargs) if transport_kwargs else None
    version = failure = resume_failure = None
    with httpx.Client(transport=transport, **client_kwargs) as client:
        try:
            _checked(client.post("/admin/pause"), "pause")
            response = client.post("/admin/weights", json=_load_body(path, adapter))
            version = _version(_checked(response, f"loading {path}"), path)
        except (WeightSyncError, httpx.HTTPError, ValueError) as e:
            failure = e
        finally:
            try:
                _checked(client.post("/admin/resume"), "resume")
            except (WeightSyncError, httpx.HTTPError, ValueError) as e:
                resume_failure = e
    return _finish(version, failure, resume_failure)


async def apush_weights(
    admin_url: str,
    admin_token: str,
    checkpoint_dir: str | Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    adapter: bool = False,
) -> int:
    """`push_weights` for callers inside an event loop (the blocking one would stall it)."""
    path = str(checkpoint_dir)
    client_kwargs, transport_kwargs = _client_args(admin_url, admin_token, timeout_s)
    transport = httpx.AsyncHTTPTransport(**transport_kwargs) if transport_kwargs else None
    version = failure = resume_failure = None
    async with httpx.AsyncClient(transport=transport, **client_kwargs) as client:
        try:
            _checked(await client.post("/admin/pause"), "pause")
            response = await client.post("/admin/weights", json=_load_body(path, adapter))
            version = _version(_checked(response, f"loading {path}"), path)
        except (WeightSyncError, httpx.HTTPError, ValueError) as e:
            failure = e
        finally:
            try:
                _checked(await client.post("/admin/resume"), "resume")
            except (WeightSyncError, httpx.HTTPError, ValueError) as e:
                resume_failure = e
    return _finish(version, failure, resume_failure)


async def push_weights_in_process(proxy: RunningProxy, checkpoint_dir: str | Path, adapter: bool = False) -> int:
    """The same protocol on a proxy in this process (`RunningProxy.swap_weights`). Must run on the proxy's
    event loop."""
    path = str(checkpoint_dir)
    version = failure = None
    try:
        version = await proxy.swap_weights(path, adapter=adapter)  # the proxy serves again whatever happens
    except Exception as e:  # noqa: BLE001 — any failure is reported, after resuming
        failure = WeightSyncError(f"loading {path} failed: {type(e).__name__}: {e}")
    return _finish(version, failure, None)


class WeightPusher:
    """The weight pushes of a GRPO run, each after its update. `wait=False` (asynchronous GRPO) does not wait for
    the swap to apply: the engine drains the generations it has started (up to a batch's worth) and serves the
    later steps' calls meanwhile, while the trainer goes on. `version` is the policy version of the trainer's
    weights once pushed (versions are sequential, one per push); `settle` waits for the push in flight — before
    the checkpoint it reads is written again, and at the end — and raises its failure."""

    def __init__(self, proxy: RunningProxy, version: int):
        self.proxy, self.version = proxy, version
        self._pending: asyncio.Task[int] | None = None

    async def settle(self) -> None:
        task, self._pending = self._pending, None
        if task is not None:
            await task

    async def push(self, checkpoint_dir: str | Path, wait: bool) -> int:
        """Push the checkpoint (after any push in flight); returns the version it will be served as."""
        await self.settle()
        task = asyncio.create_task(push_weights_in_process(self.proxy, checkpoint_dir))
        self.version += 1
        if wait:
            self.version = await task
        else:
            self._pending = task
        return self.version
