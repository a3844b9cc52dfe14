"""The tool registry: apps register the tools the agent may call; the turn loop, the
background reviewer and the compression flush all run tool calls through
:meth:`ToolRegistry.dispatch`, the one place a call is validated, run and its failure shaped
into a result the model can read.

Every app registers the same way, from its ``AppConfig.ready()``::

    registry.register(*tools.TOOLS)

where each :class:`Tool` in ``TOOLS`` names its own ``toolset``. The only tools not in the
registry are the memory providers' (per user, discovered at run time through the
:class:`ProviderTools` of the turn's memory manager); ``dispatch`` runs them too.

A handler always acts as `ctx.user` — the owner of the conversation, taken from the
server side — never as anyone the model names in its arguments.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from django.contrib.auth.models import AbstractBaseUser

from core.exceptions import ServiceError

logger = logging.getLogger(__name__)

#: Who is calling: the live chat turn, the background review, the pre-compression flush, an
#: MCP client (`client` then names the API token it used), or the review of an imported
#: ChatGPT/Claude history (`client` then is the import's id). Memory writes take it as
#: their source (memory.models.Source).
Origin = Literal["tool", "review", "flush", "mcp", "import_review"]


@dataclass
class TurnState:
    """Counters that live for one user turn (e.g. memory's failure cap)."""

    failures: dict[str, int] = field(default_factory=dict)
    notices: list[tuple[str, str]] = field(default_factory=list)


class ProviderTools(Protocol):
    """The memory providers' own tools, as the turn's MemoryManager offers them."""

    def handles_tool(self, name: str) -> bool: ...

    def handle_tool_call(self, name: str, args: dict[str, Any]) -> str: ...


@dataclass
class ToolContext:
    user: AbstractBaseUser
    session_id: str | None = None
    origin: Origin = "tool"
    turn: TurnState = field(default_factory=TurnState)
    #: The message that asked for the call (the assistant message with tool_calls).
    message_id: int | None = None
    #: Provider tools offered in this turn (None when memory is off or nobody offers any).
    providers: ProviderTools | None = None
    #: Kept with what the call writes: for origin "mcp" the name of the API token, for
    #: "import_review" the chat import's id.
    client: str = ""


@dataclass
class ToolResult:
    """What a handler returns.

    `payload` is serialised to JSON and sent to the model as the tool message; `summary`
    is the short text on the chat's tool chip ("added 1 entry"); `notice`, when set, is
    shown to the user as a `notice` event (kind, text).
    """

    ok: bool
    payload: dict[str, Any]
    summary: str
    notice: tuple[str, str] | None = None

    def content(self) -> str:
        return json.dumps(self.payload, ensure_ascii=False)


Handler = Callable[[ToolContext, dict[str, Any]], ToolResult]


@dataclass(frozen=True, kw_only=True)
class Tool:
    name: str
    #: Group used to pick tools per caller ("memory", "search", "skills", …).
    toolset: str
    description: str
    parameters: dict[str, Any]
    handler: Handler

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, *tools: Tool) -> None:
        """Add tools; registering the same tool again (a second ready()) is harmless."""
        for tool in tools:
            existing = self._tools.get(tool.name)
            if existing is not None and existing.handler is not tool.handler:
                raise ValueError(f"tool {tool.name!r} is already registered")
            self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self, toolsets: Iterable[str] | None = None) -> list[str]:
        wanted = set(toolsets) if toolsets is not None else None
        return [t.name for t in self._tools.values() if wanted is None or t.toolset in wanted]

    def schemas(self, names: Iterable[str]) -> list[dict[str, Any]]:
        return [self._tools[n].schema() for n in names if n in self._tools]

    def dispatch(
        self, ctx: ToolContext, name: str, arguments: str | dict[str, Any], *, allowed: Set[str]
    ) -> ToolResult:
        """Run one tool call and always return a result the model can read.

        ``allowed`` names the registry tools this caller offered; a provider tool of
        ``ctx.providers`` is allowed by being offered there. Bad JSON, unknown or disallowed
        tools and refused operations become error results; an unexpected exception is logged
        and reported without internals. Sync and uses the ORM: async callers pick the thread.
        """
        providers = ctx.providers if ctx.providers and ctx.providers.handles_tool(name) else None
        tool = self._tools.get(name)
        if providers is None and (tool is None or name not in allowed):
            return error_result(
                "tool_not_available",
                f"Tool '{name}' is not available here. Available: {', '.join(sorted(allowed))}.",
            )
        try:
            args = parse_arguments(arguments)
            if providers is not None:
                # Providers isolate their own failures and answer with text of their own.
                text = providers.handle_tool_call(name, args)
                return ToolResult(ok=True, payload={"result": text}, summary=f"{name} answered")
            assert tool is not None
            return tool.handler(ctx, args)
        except ServiceError as exc:
            return error_result(exc.code, exc.message, **exc.details)
        except Exception:
            logger.exception("tool %s failed", name)
            return error_result("tool_failed", f"Tool '{name}' failed unexpectedly.")


def parse_arguments(arguments: str | Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as a dict ("" means none); ServiceError if not a JSON object."""
    if not isinstance(arguments, str):
        args: Any = arguments
    else:
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ServiceError(
                "invalid_arguments", f"Arguments are not valid JSON: {exc}"
            ) from None
    if not isinstance(args, Mapping):
        raise ServiceError("invalid_arguments", "Arguments must be a JSON object.")
    return dict(args)


def error_result(code: str, message: str, **details: Any) -> ToolResult:
    return ToolResult(
        ok=False,
        payload={"success": False, "error": message, "code": code, **details},
        summary=message if len(message) <= 80 else message[:77] + "…",
    )


def _stored_payload(content: str) -> dict[str, Any]:
    try:
        payload = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return {}
    return payload if isinstance(payload, dict) else {}


def tool_summary(content: str) -> str:
    """The chip text for a stored tool result (its message, error or a generic word)."""
    payload = _stored_payload(content)
    text = str(payload.get("summary") or payload.get("message") or payload.get("error") or "")
    if not text:
        return "done"
    return text if len(text) <= 80 else text[:77] + "…"


def tool_failed(content: str) -> bool:
    return _stored_payload(content).get("success") is False


registry = ToolRegistry()
