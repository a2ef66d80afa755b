"""A sandbox pod's state, judged from its JSON (pure functions, tested without a server): whether it runs,
why it cannot (`pod_problem`), and whether a starting pod is still worth waiting for (`StartWait`)."""

from __future__ import annotations

import threading
import time

from ..base import SandboxError

__all__ = ["CONTAINER", "StartWait", "container_status", "is_running", "pod_problem", "unschedulable"]

CONTAINER = "sandbox"  # the name of the sandbox's container in its pod
# container waiting reasons that will not resolve by waiting
FATAL_WAITING = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "ErrImageNeverPull",
    "CrashLoopBackOff",
    "RunContainerError",
}


def condition(pod: dict, kind: str) -> dict | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return None


def container_status(pod: dict) -> dict | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == CONTAINER:
            return cs
    return None


def pod_problem(pod: dict | None) -> tuple[str, str] | None:
    """Why a pod cannot (or can no longer) run commands: (kind, message), kind one of `deleted`, `deadline`,
    `evicted`, `oom`, `failed`, `image`; None while it is fine (pending or running)."""
    if pod is None:
        return "deleted", "the pod was deleted"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "deleted", "the pod is being deleted"
    status = pod.get("status") or {}
    phase, reason, message = status.get("phase"), status.get("reason") or "", status.get("message") or ""
    cs = container_status(pod) or {}
    terminated = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated") or {}
    if reason == "DeadlineExceeded":
        return "deadline", f"the pod ran past its activeDeadlineSeconds ({message or reason})"
    if reason == "Evicted":
        return "evicted", f"the pod was evicted: {message or reason}"
    if terminated.get("reason") == "OOMKilled":
        return "oom", "the sandbox container was OOM-killed"
    if phase in ("Failed", "Succeeded"):
        detail = message or reason or terminated.get("reason") or f"exit code {terminated.get('exitCode')}"
        return "failed", f"the pod stopped (phase {phase}): {detail}"
    if terminated:
        return "failed", f"the sandbox container exited: {terminated.get('reason') or terminated.get('exitCode')}"
    waiting = (cs.get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in FATAL_WAITING:
        return "image", f"{waiting['reason']}: {waiting.get('message') or ''}".strip()
    return None


def is_running(pod: dict) -> bool:
    cs = container_status(pod) or {}
    return (pod.get("status") or {}).get("phase") == "Running" and "running" in (cs.get("state") or {})


def unschedulable(pod: dict) -> str | None:
    """The scheduler's message while it cannot place the pod, else None."""
    c = condition(pod, "PodScheduled")
    if c and c.get("status") == "False" and c.get("reason") == "Unschedulable":
        return c.get("message") or "Unschedulable"
    return None


class StartWait:
    """Judges a starting pod's successive states: ready, still worth waiting for, or failed (SandboxError)."""

    def __init__(self, name: str, start_timeout_s: float, unschedulable_timeout_s: float, cancel: threading.Event):
        self.name = name
        self.start = time.monotonic()
        self.start_timeout_s = start_timeout_s
        self.unschedulable_timeout_s = unschedulable_timeout_s
        self.unschedulable_since: float | None = None
        self.cancel = cancel

    def ready(self, pod: dict | None) -> bool:
        name = self.name
        problem = pod_problem(pod)
        if problem is not None:
            raise SandboxError(f"sandbox {name}: {problem[1]} (while starting)")
        assert pod is not None  # pod_problem reports a missing pod as deleted
        if is_running(pod):
            return True
        now = time.monotonic()
        why = unschedulable(pod)
        if why is None:
            self.unschedulable_since = None
        else:
            self.unschedulable_since = self.unschedulable_since or now
            if now - self.unschedulable_since >= self.unschedulable_timeout_s:
                raise SandboxError(
                    f"sandbox {name}: the pod stayed unschedulable for {self.unschedulable_timeout_s:g}s: {why}"
                )
        if now - self.start >= self.start_timeout_s:
            raise SandboxError(
                f"sandbox {name}: the pod did not start within {self.start_timeout_s:g}s "
                f"(phase {(pod.get('status') or {}).get('phase')})"
            )
        if self.cancel.is_set():
            raise SandboxError(f"sandbox {name}: creation cancelled")
        return False

    def next_wait(self) -> float:
        """How long the next watch may block before the timeouts need judging again."""
        now = time.monotonic()
        limits = [self.start_timeout_s - (now - self.start), 5.0]
        if self.unschedulable_since is not None:
            limits.append(self.unschedulable_timeout_s - (now - self.unschedulable_since))
        return max(0.5, min(limits))
