"""The MCP server over real HTTP: the site's ASGI application (hermes_site.asgi) served by
uvicorn in a thread of the test process without lifespan events (as daphne serves it), on
the test database; the official MCP client talks to it. The slow test runs real daphne."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest
import uvicorn
from asgiref.sync import SyncToAsync
from django.db import connections
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from accounts.services import api_token_create
from tests.conftest import free_port, wait_for


@pytest.fixture
def mcp_url(transactional_db) -> Iterator[str]:
    """The URL of /mcp/ on a live server (committed data: the server's threads read it)."""
    from hermes_site.asgi import application

    port = free_port()
    config = uvicorn.Config(
        application, host="127.0.0.1", port=port, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=10, what="uvicorn")
    try:
        yield f"http://127.0.0.1:{port}/mcp/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        # The server's ORM calls ran on asgiref's one thread for thread-sensitive work; its
        # PostgreSQL connection (kept CONN_MAX_AGE) would stop the test database's removal.
        SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


def token_for(user: Any, *scopes: str, name: str = "claude") -> str:
    """A new API token's key for `user` with `scopes` (none given: all)."""
    _token, key = api_token_create(user=user, name=name, scopes=scopes or None)
    return key


def with_session(url: str, key: str, work: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Run `work` with an initialised MCP client session as the token's owner."""

    async def main() -> Any:
        async with AsyncExitStack() as stack:
            # The newer streamable_http_client is not in every release requirements.txt allows.
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore", DeprecationWarning)
            read, write, _ = await stack.enter_async_context(
                streamablehttp_client(url, headers={"Authorization": f"Bearer {key}"})
            )
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            return await work(session)

    return anyio.run(main)


def call(url: str, key: str, tool: str, arguments: dict[str, Any] | None = None):
    """One tool call; returns the CallToolResult."""
    return with_session(url, key, lambda s: s.call_tool(tool, arguments or {}))
