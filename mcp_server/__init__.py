"""The MCP server: a person's memory, conversation search and skills for other agents and
desktop assistants (Model Context Protocol, streamable HTTP at /mcp/), behind personal API
tokens and their scopes.

    auth      the ASGI front: host check, Bearer token, 401/403
    tools     the tools and resources: scope per call, the agent's own tool handlers
    server    the SDK's low-level server and one stateless exchange per HTTP request
    routing   /mcp/ beside Django in the site's ASGI application
"""
