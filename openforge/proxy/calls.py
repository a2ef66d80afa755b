"""Model calls being served, apart from the connections that asked for them.

Each call runs as its own task (`CallJob`): it writes its streamed events into a list that any number of
connections follow, and ends with one outcome. So
- a client that disconnects does not stop its call: the call finishes and is recorded (the harness never saw
  it complete, so it retries — and its retry is answered from this call);
- a retry of a call still generating (the same body in the same episode: Codex retries a stream that went
  quiet) follows the same call from its first event instead of sampling again, and a retry of a finished call
  is answered with the recorded reply (the last few calls of each episode are kept for this);
- the calls an episode has in flight are counted (`ProxySettings.max_calls_in_flight_per_episode`).
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field


@dataclass
class CallResponse:
    """What the HTTP layer sends: a JSON body, or an event stream (`stream`, followed live; `chunks`, the
    complete stream of a finished call)."""

    status: int
    body: dict | None = None
    chunks: list[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    replayed: bool = False
    stream: AsyncIterator[bytes] | None = None

    def payload(self) -> bytes:
        if self.chunks is not None:
            return b"".join(self.chunks)
        return json.dumps(self.body).encode()


class CallJob:
    """One call: its streamed events so far and, once finished, its outcome (`response`)."""

    def __init__(self, episode_id: str, digest: str, streamed: bool):
        self.episode_id = episode_id
        self.digest = digest
        self.streamed = streamed
        self.events: list[bytes] = []
        self.response: CallResponse | None = None
        self.task: asyncio.Task | None = None
        self.followers = 0
        self.failed = False  # refused or failed: a retry of it is a new attempt, not a replay
        self._wake = asyncio.Event()
        self._done = asyncio.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def started(self) -> bool:
        """The stream's first events are written (its 200 can go out)."""
        return bool(self.events)

    def emit(self, events: list[bytes]) -> None:
        if events:
            self.events.extend(events)
            self._changed()

    def finish(self, response: CallResponse, *, failed: bool = False) -> None:
        self.response = response
        self.failed = failed
        self._done.set()
        self._changed()
        if not self.followers and len(self.events) > 1:  # kept for retries: one blob, not an object per token
            self.events = [b"".join(self.events)]

    def _changed(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    async def until_started(self) -> None:
        """Returns once the stream has its first events or the call is over."""
        while not (self.started or self.done):
            await self._wake.wait()

    async def outcome(self) -> CallResponse:
        await self._done.wait()
        assert self.response is not None
        return self.response

    async def follow(self) -> AsyncIterator[bytes]:
        """Every event of the stream from the first, live, until the call is over. The events that arrived
        since the follower last wrote go out as one chunk (one socket write: the stream's opening events with
        its first token, its closing events), each token still as soon as it is emitted."""
        self.followers += 1
        try:
            sent = 0
            while True:
                events = self.events  # a finished call's events may be joined into one blob meanwhile
                if sent < len(events):
                    chunk = events[sent] if sent + 1 == len(events) else b"".join(events[sent:])
                    sent = len(events)
                    yield chunk
                    continue  # more may have been emitted while the chunk was written
                if self.done:
                    return
                await self._wake.wait()
        finally:
            self.followers -= 1


class CallJobs:
    """The calls of every episode: those in flight, and the last `keep` finished ones (for retries)."""

    def __init__(self, keep: int):
        self.keep = keep
        self._by_episode: dict[str, OrderedDict[str, CallJob]] = {}
        self.running = 0  # calls of every episode whose work has not ended

    def find(self, episode_id: str, digest: str) -> CallJob | None:
        calls = self._by_episode.get(episode_id)
        return calls.get(digest) if calls is not None else None

    def in_flight(self, episode_id: str) -> int:
        return sum(1 for job in self._by_episode.get(episode_id, {}).values() if not job.done)

    def start(self, job: CallJob, work: Callable[[CallJob], Awaitable[None]]) -> CallJob:
        """Run `work(job)` as the job's task; the job is found by its digest from now on."""
        calls = self._by_episode.setdefault(job.episode_id, OrderedDict())
        calls[job.digest] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job, work))
        return job

    async def _run(self, job: CallJob, work: Callable[[CallJob], Awaitable[None]]) -> None:
        self.running += 1
        try:
            await work(job)
        finally:
            self.running -= 1
            if not job.done:  # `work` ends every call it can; this only keeps followers from waiting forever
                job.finish(
                    CallResponse(500, {"error": {"message": "the call was stopped before it finished"}}), failed=True
                )
            calls = self._by_episode.get(job.episode_id)
            if calls is not None:
                if job.failed and calls.get(job.digest) is job:
                    del calls[job.digest]  # a retry of a failed call is a new attempt
                finished = [d for d, j in calls.items() if j.done]
                for digest in finished[: max(0, len(finished) - self.keep)]:
                    del calls[digest]

    def forget(self, episode_id: str) -> list[CallJob]:
        """Stop tracking the episode; returns its calls still in flight (the caller cancels them)."""
        calls = self._by_episode.pop(episode_id, OrderedDict())
        return [job for job in calls.values() if not job.done]
