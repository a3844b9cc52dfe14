"""/mcp/ in the site's ASGI application: requests for it go to the MCP server (behind the
token check), everything else to the application given (Django)."""

from __future__ import annotations

from .auth import ASGIApp, Scope, token_required
from .server import mcp_app

MCP_PATHS = ("/mcp", "/mcp/")

_mcp = token_required(mcp_app)


def with_mcp(app: ASGIApp) -> ASGIApp:
    async def router(scope: Scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] in MCP_PATHS:
            await _mcp(scope, receive, send)
        else:
            await app(scope, receive, send)

    return router
