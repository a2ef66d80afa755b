"""`openforge view`: serve the viewer on loopback until interrupted."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from openforge.core.errors import ListenError

LOOPBACK = "127.0.0.1"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; ListenError when it cannot be had (in use, not this machine's)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise ListenError(
            f"the viewer cannot listen on {host}:{port}: {e.strerror or e}; choose another --port "
            "(0: any free one) or --host"
        ) from None
    return sock


def serve(
    run_dirs: list[Path],
    host: str = LOOPBACK,
    port: int = 8321,
    model: Path | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Discover the runs, bind (port 0 picks a free one), announce the URL, serve until interrupted."""
    import uvicorn

    from openforge.view.app import create_app
    from openforge.view.library import Library

    library = Library(run_dirs, model=model)
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(create_app(library), log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    announce(f"http://{shown}:{bound}/")
    try:
        server.run(sockets=[sock])
    finally:
        library.close()
        sock.close()
