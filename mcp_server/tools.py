"""What an MCP client may call: the tools and resources, the scope each call needs, and how
a call runs (sync, ORM: the server calls these in a thread).

The tools are the agent's own (`memory`, `session_search`, `skills_list`, `skill_view`,
`skill_manage`), run through the same registry dispatch as a chat turn, as the token's
owner, with origin "mcp" and the token's name as `client` (kept with every memory write and
audit event). `memory` gains a `view` action here: a chat agent sees its memory in the
prompt, an MCP client has to ask.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache

from accounts.models import ApiToken, TokenScope
from core.exceptions import ServiceError
from memory.models import Target
from memory.selectors import memory_contents, memory_export, memory_settings, memory_usage
from sessions_app.agent.tools import ToolContext, ToolResult, TurnState, error_result, registry

#: The memory tool's failure cap counts a client's failed calls in a row (the chat counts
#: per turn, which an MCP client does not have); a quiet spell this long starts afresh.
FAILURE_WINDOW_SECONDS = 600

MEMORY_DESCRIPTION = """\
The person's persistent memory in Hermes Web, shared with their Hermes agent: "memory" holds \
notes about their environment, projects, conventions and lessons learned; "user" holds who \
they are (name, role, preferences, communication style).

- view: the current entries and how full each list is (target optional: both).
- add(target, content): a new entry. replace(target, old_text, content): old_text is a short \
substring unique to one entry, which content replaces whole. remove(target, old_text).
- operations: several add/replace/remove on one target in one all-or-nothing call.

Save facts that will still be true next week, written as declarative facts ("Prefers \
concise answers"). Each list has a hard size limit; when it is full, merge or remove stale \
entries instead of skipping the fact. Every entry is checked for prompt injection and \
secrets exfiltration; a refused write says why."""


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    parameters: dict[str, Any]
    #: The scope a call with these arguments needs.
    scope: Callable[[dict[str, Any]], str]
    #: Scopes of which one is enough to see the tool listed.
    listed_for: tuple[str, ...]
    run: Callable[[ApiToken, dict[str, Any]], ToolResult]


def _context(token: ApiToken) -> ToolContext:
    return ToolContext(user=token.user, origin="mcp", client=token.name)


def _failures_key(token: ApiToken) -> str:
    return f"mcp:memory-failures:{token.pk}"


def _dispatch(token: ApiToken, name: str, args: dict[str, Any]) -> ToolResult:
    return registry.dispatch(_context(token), name, args, allowed={name})


def _memory_view(token: ApiToken, args: dict[str, Any]) -> ToolResult:
    enabled, _approval = memory_settings(user=token.user)
    if not enabled:
        raise ServiceError("memory_off", "Memory is off for this person (Account page).")
    wanted = args.get("target")
    if wanted is not None and wanted not in Target.values:
        raise ServiceError("invalid_target", f"Invalid target {wanted!r}. Use 'memory' or 'user'.")
    targets = [wanted] if wanted else list(Target.values)
    lists = {
        target: {
            "entries": memory_contents(user=token.user, target=target),
            "usage": memory_usage(user=token.user, target=target).text(),
        }
        for target in targets
    }
    counts = ", ".join(f"{t}: {len(v['entries'])}" for t, v in lists.items())
    return ToolResult(ok=True, payload={"success": True, **lists}, summary=f"entries ({counts})")


def _memory(token: ApiToken, args: dict[str, Any]) -> ToolResult:
    if args.get("action") == "view" and args.get("operations") is None:
        return _memory_view(token, args)
    # The agent's handler with its failure cap; the count lives between requests.
    ctx = _context(token)
    ctx.turn = TurnState(failures={"memory": cache.get(_failures_key(token), 0)})
    result = registry.dispatch(ctx, "memory", args, allowed={"memory"})
    cache.set(_failures_key(token), ctx.turn.failures.get("memory", 0), FAILURE_WINDOW_SECONDS)
    return result


def _search(token: ApiToken, args: dict[str, Any]) -> ToolResult:
    # Summaries cost a model call and up to a minute: here only when asked for.
    return _dispatch(token, "session_search", {"summaries": False, **args})


def _registry_tool(name: str) -> tuple[str, dict[str, Any]]:
    tool = registry.get(name)
    if tool is None:  # an app's ready() registers it; without it the site is misconfigured
        raise RuntimeError(f"the agent tool {name!r} is not registered")
    return tool.description, copy.deepcopy(tool.parameters)


def _search_tool() -> McpTool:
    description, parameters = _registry_tool("session_search")
    parameters["properties"]["summaries"]["description"] = (
        "With a query: summarise each conversation with the site's model (slower, default "
        "false); otherwise the matching snippets come back at once."
    )
    return McpTool(
        name="session_search",
        description=description.replace(" (not the current one)", ""),
        parameters=parameters,
        scope=lambda args: TokenScope.SEARCH,
        listed_for=(TokenScope.SEARCH,),
        run=_search,
    )


def _skills_tool(name: str, scope: str) -> McpTool:
    description, parameters = _registry_tool(name)
    return McpTool(
        name=name,
        description=description,
        parameters=parameters,
        scope=lambda args: scope,
        listed_for=(scope,),
        run=lambda token, args: _dispatch(token, name, args),
    )


def _memory_parameters() -> dict[str, Any]:
    """The agent's memory parameters with `view`, for which the target is optional."""
    _description, parameters = _registry_tool("memory")
    parameters["properties"]["action"]["enum"] = [
        "view",
        *parameters["properties"]["action"]["enum"],
    ]
    parameters["properties"]["target"]["description"] += " Optional with view: both."
    parameters.pop("required", None)
    return parameters


def mcp_tools() -> dict[str, McpTool]:
    """The tools by name (built from the registry, so call after the apps are ready)."""
    tools = [
        McpTool(
            name="memory",
            description=MEMORY_DESCRIPTION,
            parameters=_memory_parameters(),
            scope=lambda args: (
                TokenScope.MEMORY_READ
                if args.get("action") == "view" and args.get("operations") is None
                else TokenScope.MEMORY_WRITE
            ),
            listed_for=(TokenScope.MEMORY_READ, TokenScope.MEMORY_WRITE),
            run=_memory,
        ),
        _search_tool(),
        _skills_tool("skills_list", TokenScope.SKILLS_READ),
        _skills_tool("skill_view", TokenScope.SKILLS_READ),
        _skills_tool("skill_manage", TokenScope.SKILLS_WRITE),
    ]
    return {tool.name: tool for tool in tools}


def tool_call(tool: McpTool, token: ApiToken, args: dict[str, Any]) -> ToolResult:
    """Run one call as the token's owner; refusals are results. Call after checking that
    the token has `tool.scope(args)`."""
    try:
        return tool.run(token, args)
    except ServiceError as exc:
        return error_result(exc.code, exc.message, **exc.details)


def missing_scope(scope: str) -> ToolResult:
    return error_result(
        "missing_scope",
        f"This token lacks the '{scope}' scope. Create a token with it on the Account page.",
        scope=scope,
    )


#: The resources: URI → (file name, target).
RESOURCES = {
    "hermes://memory/MEMORY.md": ("MEMORY.md", Target.MEMORY),
    "hermes://memory/USER.md": ("USER.md", Target.USER),
}


def resource_text(token: ApiToken, uri: str) -> str:
    """MEMORY.md or USER.md exactly as the Hermes export writes them."""
    _name, target = RESOURCES[uri]
    return memory_export(user=token.user, target=target)
