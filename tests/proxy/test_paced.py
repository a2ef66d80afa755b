"""`_paced`, which carries a generation's tokens to the streamed reply: every item in order, `IDLE` while the
source is quiet, the source's failure raised, and closing it stops the source (that is how a call whose
client went away stops generating)."""

from __future__ import annotations

import asyncio

import pytest

from openforge.proxy.service import IDLE, _paced


async def collect(source, first_wait=0.05, interval=0.05) -> list:
    return [item async for item in _paced(source, first_wait, interval)]


async def test_items_pass_in_order_with_idle_while_the_source_is_quiet():
    async def source():
        yield 1
        yield 2  # at once: no IDLE between
        await asyncio.sleep(0.18)
        yield 3

    items = await collect(source())
    assert [i for i in items if i is not IDLE] == [1, 2, 3]
    assert items[:2] == [1, 2] and 2 <= items.count(IDLE) <= 4 and items[-1] == 3


async def test_the_sources_failure_is_raised_after_its_items():
    async def source():
        yield "a"
        raise RuntimeError("backend broke")

    seen = []
    with pytest.raises(RuntimeError, match="backend broke"):
        async for item in _paced(source(), 1.0, 1.0):
            seen.append(item)
    assert seen == ["a"]


async def test_closing_it_stops_the_source_mid_wait():
    stopped = asyncio.Event()

    async def source():
        try:
            yield "first"
            await asyncio.sleep(60)  # a long generation
            yield "never"
        finally:
            stopped.set()

    paced = _paced(source(), 0.01, 0.01)
    assert await paced.__anext__() == "first"
    assert await paced.__anext__() is IDLE  # the source is waiting inside its sleep
    await paced.aclose()
    assert stopped.is_set()  # its finally ran: the generation was stopped, not left running


async def test_a_source_that_stops_on_its_own_cancellation_does_not_leave_the_reader_waiting():
    async def source():
        yield 1
        raise asyncio.CancelledError  # e.g. something inside the backend was cancelled

    async def read():
        return [item async for item in _paced(source(), 60.0, 60.0)]

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(read(), 5)  # a reader left waiting would time out instead
