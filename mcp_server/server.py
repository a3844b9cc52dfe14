"""The MCP protocol side, with the official SDK's low-level server.

Every HTTP request is one stateless exchange: a fresh streamable-HTTP transport and a server
run in a task group of the request's own. The SDK's session manager would need the ASGI
lifespan to start its task group, and daphne (`make run`, `make serve`) never sends
lifespan events; stateless exchanges also let any ASGI process behind nginx answer any
request, with nothing to keep between them. Tool handlers reach the ORM only through
`database_sync_to_async`.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import anyio
from anyio.abc import TaskStatus
from channels.db import database_sync_to_async
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

from accounts.models import ApiToken, TokenScope

from .auth import TOKEN_KEY, Scope
from .tools import RESOURCES, McpTool, mcp_tools, missing_scope, resource_text, tool_call

INSTRUCTIONS = """\
This is the person's Hermes Web: their memory (notes and a profile, shared with their \
Hermes agent), their past conversations, and their skills (procedures). Read MEMORY.md and \
USER.md (resources, or the memory tool's view) at the start of a task; save durable facts \
with the memory tool; search past conversations when the person refers to earlier work."""

#: JSON-RPC error code for a resource the token's scopes do not cover.
FORBIDDEN = -32003

server: Server = Server("hermes-web", instructions=INSTRUCTIONS)


@cache
def _tools() -> dict[str, McpTool]:
    # Built on first use: the agent tools' registry is filled by the apps' ready().
    return mcp_tools()


def _token() -> ApiToken:
    request = server.request_context.request
    return request.scope[TOKEN_KEY]


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    token = _token()
    return [
        types.Tool(name=tool.name, description=tool.description, inputSchema=tool.parameters)
        for tool in _tools().values()
        if any(token.has_scope(scope) for scope in tool.listed_for)
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    token = _token()
    tool = _tools().get(name)
    if tool is None:
        text = f"Unknown tool {name!r}. Tools: {', '.join(_tools())}."
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], isError=True
        )
    scope = tool.scope(arguments)
    if token.has_scope(scope):
        result = await database_sync_to_async(tool_call)(tool, token, arguments)
    else:
        result = missing_scope(scope)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.content())],
        structuredContent=result.payload,
        isError=not result.ok,
    )


@server.list_resources()
async def list_resources() -> list[types.Resource]:
    if not _token().has_scope(TokenScope.MEMORY_READ):
        return []
    return [
        types.Resource(
            uri=AnyUrl(uri),
            name=name,
            description=f"The person's {name} (Hermes' format: entries separated by '§').",
            mimeType="text/markdown",
        )
        for uri, (name, _target) in RESOURCES.items()
    ]


@server.read_resource()
async def read_resource(uri: AnyUrl) -> str:
    token = _token()
    if str(uri) not in RESOURCES:
        raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"No resource {uri}."))
    if not token.has_scope(TokenScope.MEMORY_READ):
        message = "This token lacks the 'memory:read' scope."
        raise McpError(types.ErrorData(code=FORBIDDEN, message=message))
    return await database_sync_to_async(resource_text)(token, str(uri))


async def mcp_app(scope: Scope, receive: Any, send: Any) -> None:
    """ASGI app of one MCP request (behind auth.token_required)."""
    transport = StreamableHTTPServerTransport(mcp_session_id=None)

    async def run_server(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with transport.connect() as (read_stream, write_stream):
            task_status.started()
            await server.run(
                read_stream, write_stream, server.create_initialization_options(), stateless=True
            )

    async with anyio.create_task_group() as group:
        try:
            await group.start(run_server)
            await transport.handle_request(scope, receive, send)
        finally:
            # The server's run ends with its streams; shielded so a client that went away
            # still leaves nothing behind.
            with anyio.CancelScope(shield=True):
                await transport.terminate()
