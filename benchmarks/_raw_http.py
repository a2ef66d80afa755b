"""A lean HTTP/1.1 client for load generation: POSTs over one keep-alive asyncio connection, the response read
whole (chunked or with a Content-Length). It costs a fraction of httpx's CPU per call, so that in
benchmarks/proxy.py's throughput part the proxy under test, not the client on the other core, is what runs out
of CPU (with httpx the client's core saturated first: ~6.5 ms of client CPU per call)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit


class RawConnection:
    """`post(body, headers)` → (status, body bytes); a broken connection returns (0 or the status, what had
    arrived) and the next call reconnects."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        status, received = 0, bytearray()
        try:
            if self._streams is None:
                self._streams = await asyncio.open_connection(self.host, self.port)
            reader, writer = self._streams
            head = [f"POST {self.path} HTTP/1.1", f"host: {self.host}:{self.port}", f"content-length: {len(body)}"]
            head += ["content-type: application/json", *(f"{k}: {v}" for k, v in headers.items())]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            status = int((await reader.readline()).split(b" ", 2)[1])
            fields: dict[bytes, bytes] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                fields[name.strip().lower()] = value.strip().lower()
            if fields.get(b"transfer-encoding") == b"chunked":
                while size := int((await reader.readline()).split(b";")[0], 16):
                    received += await reader.readexactly(size)
                    await reader.readexactly(2)
                await reader.readline()  # the empty trailer
            elif b"content-length" in fields:
                received += await reader.readexactly(int(fields[b"content-length"]))
            else:
                received += await reader.read()
                fields[b"connection"] = b"close"
            if fields.get(b"connection") == b"close":
                await self.close()
        except (OSError, EOFError, ValueError, IndexError, asyncio.IncompleteReadError):
            await self.close()
        return status, bytes(received)

    async def close(self) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
