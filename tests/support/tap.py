"""A TCP relay between a client and a server that watches what the server sends: when `marker` has passed
through towards the client, it calls `on_marker` (once). Lets a test see that a harness received the start of
a streamed reply — from its own connection — while the reply was still being generated. No tests here."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class Tap:
    def __init__(self, upstream: tuple[str, int], marker: bytes, on_marker: Callable[[], None]):
        self.upstream, self.marker, self.on_marker = upstream, marker, on_marker
        self.fired = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, watch: bool) -> None:
        seen = b""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
                if watch and not self.fired.is_set():
                    seen = (seen + data)[-4096:]
                    if self.marker in seen:
                        self.fired.set()
                        self.on_marker()
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._closing = True
        self._listener.close()
