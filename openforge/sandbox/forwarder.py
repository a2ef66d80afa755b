"""The proxy bridge: a small asyncio TCP -> Unix-socket relay, and the local sandbox's launcher.

Standard library only, and runnable as a plain file (`python3 -I forwarder.py ...`), because it runs where
the openforge package may not be importable (inside a bubblewrap sandbox) and must start fast.

**Docker** (`openforge.sandbox.docker`): started on the host *in the container's network namespace*

    nsenter --net=/proc/<container pid>/ns/net -- python -I forwarder.py \\
        --listen 127.0.0.1:8100 --uds /run/openforge/proxy.sock --parent-pid <orchestrator> --watch-pid <container pid>

It listens on the container's loopback (the only interface a `--network none` container has), relays every
connection to the proxy's model API Unix socket on the host, and prints `READY <host>:<port>` once listening.
It exits when its parent dies (PR_SET_PDEATHSIG, plus a parent-pid poll that closes the race) and when the
container's init process is gone (`--watch-pid`), so a crashed orchestrator leaves no forwarder behind.

**Local** (`openforge.sandbox.local`): the launcher inside bubblewrap, as root in fresh namespaces:

    python3 -I forwarder.py [--listen 127.0.0.1:8100 --uds /run/openforge/proxy.sock] \\
        [--user UID:GID] [--nproc N] [--cpu-s S] [--as-bytes B] [--keep-caps chown,...] -- CMD ...

binds the listener (if any), forks the relay (which dies with the launcher), sets rlimits, drops every
capability (`drop_capabilities`: bounding set emptied, ambient set cleared, `SECBIT_NOROOT` locked so that
even uid 0 gains none at exec, `no_new_privs`), drops to the command's uid/gid and execs CMD — so the relay
runs as root (the agent cannot kill it) and CMD runs without a single capability, as the agent's user or as
root alike, with the relay already listening. `--keep-caps` (the local backend's own file operations only:
tar, cat, chown) keeps the named file capabilities in the bounding set for a uid-0 command.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
# asyncio is imported by the relay alone, where it runs: it is most of the launcher's start (~30 of ~50 ms), and
# the local sandbox starts a launcher for every command it runs

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT (+ _LOCKED): uid 0 gains no capability at exec; NO_CAP_AMBIENT_RAISE (+ _LOCKED): none comes back
SECURE_NOROOT = (1 << 0) | (1 << 1) | (1 << 6) | (1 << 7)
# The only capabilities a launcher may keep (`--keep-caps`), for the backend's own file operations.
FILE_CAPS = {"chown": 0, "dac_override": 1, "dac_read_search": 2, "fowner": 3, "fsetid": 4}
BUF = 1 << 16
# A harness keeps a handful of connections open (Claude Code's sub-agents, OpenClaw's pool); 64 is room to spare.
MAX_CONNECTIONS = 64


def _set_pdeathsig(sig: int = signal.SIGKILL) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except Exception:  # not Linux / no libc: the parent-pid poll still applies
        pass


def _prctl(libc: ctypes.CDLL, *args: int) -> None:
    if libc.prctl(*args, *([0] * (5 - len(args)))) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl{args}: {os.strerror(err)}")


def drop_capabilities(keep: frozenset[int] = frozenset()) -> None:
    """Leave this process, and everything it execs, no capability but `keep` (for uid 0 only): the bounding
    set emptied (but `keep`), the ambient set cleared, `no_new_privs` set; without `keep`, also the secure bits
    that stop uid 0 from regaining the full set at exec. Raises OSError when it cannot (only root can drop
    the bounding set); the caller must then not run the command."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    if not keep:
        _prctl(libc, PR_SET_SECUREBITS, SECURE_NOROOT)
    _prctl(libc, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    for cap in range(last + 1):
        if cap not in keep:
            _prctl(libc, PR_CAPBSET_DROP, cap)
    _prctl(libc, PR_SET_NO_NEW_PRIVS, 1)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    import asyncio

    try:
        while True:
            data = await reader.read(BUF)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError, asyncio.CancelledError):
        pass


class _Relay:
    """Relays each accepted connection to the proxy's socket, at most `max_connections` at a time: a sandbox
    opening thousands of connections would otherwise spend the proxy's file descriptors, which every other
    episode needs. One over the cap is closed at once (the harness's SDK retries a refused connection)."""

    def __init__(self, uds: str, max_connections: int):
        self.uds = uds
        self.max_connections = max_connections
        self.active = 0

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self.active >= self.max_connections:
            client_w.close()
            return
        self.active += 1
        try:
            await _handle(client_r, client_w, self.uds)
        finally:
            self.active -= 1


async def _handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, uds: str) -> None:
    import asyncio

    try:
        up_r, up_w = await asyncio.open_unix_connection(uds)
    except OSError:
        client_w.close()  # proxy down: the client sees a closed connection, as with a refused one
        return
    try:
        await asyncio.gather(_pump(client_r, up_w), _pump(up_r, client_w))
    finally:
        for w in (client_w, up_w):
            try:
                w.close()
            except Exception:
                pass


async def _watch(parent_pid: int | None, watch_pid: int | None, stop: asyncio.Event) -> None:
    import asyncio

    while not stop.is_set():
        if parent_pid is not None and os.getppid() != parent_pid:
            stop.set()
        elif watch_pid is not None and not os.path.exists(f"/proc/{watch_pid}"):
            stop.set()
        else:
            try:
                await asyncio.wait_for(stop.wait(), 0.5)
            except TimeoutError:
                pass


async def serve(
    sock: socket.socket,
    uds: str,
    *,
    parent_pid: int | None = None,
    watch_pid: int | None = None,
    ready: str | None = None,
    max_connections: int = MAX_CONNECTIONS,
) -> None:
    """Relay connections accepted on the bound, listening `sock` to the Unix socket `uds` (at most
    `max_connections` at a time) until the parent or the watched process goes away (or SIGTERM)."""
    import asyncio

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    relay = _Relay(uds, max_connections)
    server = await asyncio.start_server(relay.handle, sock=sock, limit=BUF)
    if ready is not None:
        sys.stdout.write(ready + "\n")
        sys.stdout.flush()
    async with server:
        await _watch(parent_pid, watch_pid, stop)


def _bind(listen: str) -> socket.socket:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(512)
    sock.setblocking(False)
    return sock


def _launch(args: argparse.Namespace) -> None:
    """Local-sandbox launcher: optional relay child, rlimits, privilege drop, exec."""
    if not args.cmd:
        sys.exit("forwarder: nothing to run after --")
    if args.listen:
        if not args.uds:
            sys.exit("forwarder: --listen needs --uds")
        sock = _bind(args.listen)
        me = os.getpid()
        child = os.fork()
        if child == 0:  # the relay: dies with the launcher (whose pid the exec'd command keeps)
            _set_pdeathsig()
            if os.getppid() != me:
                os._exit(0)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            if os.getuid() == 0:
                try:  # it stays root (the agent cannot kill it), but with no capability
                    drop_capabilities()
                except OSError:
                    os._exit(0)
            try:
                import asyncio

                asyncio.run(serve(sock, args.uds, parent_pid=me, max_connections=args.max_connections))
            finally:
                os._exit(0)
        sock.close()
    import resource

    def lim(kind: int, value: int | None) -> None:
        if value:
            try:
                resource.setrlimit(kind, (value, value))
            except (ValueError, OSError):
                pass

    lim(resource.RLIMIT_NPROC, args.nproc)
    lim(resource.RLIMIT_CPU, args.cpu_s)
    lim(resource.RLIMIT_AS, args.as_bytes)
    keep = frozenset(FILE_CAPS[c] for c in args.keep_caps.split(",") if c) if args.keep_caps else frozenset()
    try:
        drop_capabilities(keep)
    except OSError as e:
        if os.geteuid() == 0:  # never run a command as root with capabilities we failed to drop
            sys.stderr.write(f"forwarder: cannot drop capabilities: {e}\n")
            os._exit(126)
        # unprivileged (a local sandbox without root): bubblewrap left no capability to drop
    if args.user:
        uid_s, _, gid_s = args.user.partition(":")
        uid, gid = int(uid_s), int(gid_s or uid_s)
        if os.getuid() == 0 and uid != 0:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
    try:
        os.execvp(args.cmd[0], args.cmd)
    except OSError as e:
        sys.stderr.write(f"{args.cmd[0]}: {e.strerror}\n")
        os._exit(127 if isinstance(e, FileNotFoundError) else 126)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(prog="forwarder", description="TCP -> Unix socket relay (the proxy bridge)")
    p.add_argument("--listen", help="host:port to listen on (e.g. 127.0.0.1:8100)")
    p.add_argument("--uds", help="the Unix socket to relay to")
    p.add_argument("--parent-pid", type=int, help="exit when this is no longer our parent")
    p.add_argument("--watch-pid", type=int, help="exit when this process is gone (the container's init)")
    p.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        help=f"connections relayed at once; more are closed at once (default {MAX_CONNECTIONS})",
    )
    p.add_argument("--user", help="launcher mode: UID:GID to run the command as")
    p.add_argument("--nproc", type=int)
    p.add_argument("--cpu-s", type=int)
    p.add_argument("--as-bytes", type=int)
    p.add_argument(
        "--keep-caps",
        default="",
        help="launcher mode: file capabilities a uid-0 command keeps "
        f"(comma-separated: {', '.join(FILE_CAPS)}); default none",
    )
    args = p.parse_args(argv)
    args.cmd = cmd
    if cmd or args.user:
        _launch(args)
        return
    if not (args.listen and args.uds):
        p.error("relay mode needs --listen and --uds")
    _set_pdeathsig()
    if args.parent_pid is not None and os.getppid() != args.parent_pid:
        return  # the parent died before PR_SET_PDEATHSIG took effect
    try:
        sock = _bind(args.listen)
    except OSError as e:
        sys.stderr.write(f"forwarder: cannot listen on {args.listen}: {e}\n")
        sys.exit(2)
    import asyncio

    asyncio.run(
        serve(
            sock,
            args.uds,
            parent_pid=args.parent_pid,
            watch_pid=args.watch_pid,
            ready=f"READY {args.listen}",
            max_connections=args.max_connections,
        )
    )


if __name__ == "__main__":
    main()
