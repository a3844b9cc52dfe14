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

What a call did is said twice: the result payload, in English, is what the model reads; the
chip under the call in the chat says it to the person, in their language, from that payload
(:meth:`ToolRegistry.chip_text`, live and on a reload alike).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from django.contrib.auth.models import AbstractBaseUser
from django.utils.translation import gettext, gettext_lazy

from accounts.language import reads_english
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
    says in a few English words what the call did, for the records of background runs (the
    chat's chip is said from the payload, see :attr:`Tool.chip`); `notice`, when set, is
    shown to the user as a `notice` event (kind, text).
    """

    ok: bool
    payload: dict[str, Any]
    summary: str
    notice: tuple[str, str] | None = None

    def content(self) -> str:
        return json.dumps(self.payload, ensure_ascii=False)


Handler = Callable[[ToolContext, dict[str, Any]], ToolResult]
#: A tool's chip: (result payload, call arguments) → what the call did in a few words, in
#: the active language; "" leaves it to the generic chip (the payload's own text).
ChipText = Callable[[Mapping[str, Any], Mapping[str, Any]], str]


@dataclass(frozen=True, kw_only=True)
class Tool:
    name: str
    #: Group used to pick tools per caller ("memory", "search", "skills", …).
    toolset: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    chip: ChipText | None = None

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

    def chip_text(
        self, name: str, payload: Mapping[str, Any], arguments: str | Mapping[str, Any]
    ) -> str:
        """The chip under a call of `name`, in the active language, from its result payload
        (what the model read) and the call's arguments: the tool's own wording for its
        payload, else the payload's text (provider tools, tools gone since)."""
        tool = self._tools.get(name)
        try:
            args = parse_arguments(arguments)
        except ServiceError:
            args = {}
        text = tool.chip(payload, args) if tool is not None and tool.chip is not None else ""
        return _clip(text or _generic_chip(payload))


#: Short words for the registry's own refusals and the most common one, for a chip in
#: another language than English (the payload says them at length, in English).
_ERROR_CHIPS = {
    "tool_not_available": gettext_lazy("not available here"),
    "tool_failed": gettext_lazy("failed unexpectedly"),
    "invalid_arguments": gettext_lazy("invalid arguments"),
    "not_found": gettext_lazy("not found"),
}


def _generic_chip(payload: Mapping[str, Any]) -> str:
    if payload.get("success") is False:
        return _error_chip(payload)
    return str(payload.get("summary") or payload.get("message") or "") or gettext("done")


def _error_chip(payload: Mapping[str, Any]) -> str:
    """A refusal's chip: its message when the catalog knows it (a marked service message)
    or the reader reads English, else a few words for its code."""
    message = str(payload.get("error") or "")
    said = gettext(message) if message else ""
    if said and (said != message or reads_english()):
        return said
    return str(_ERROR_CHIPS.get(str(payload.get("code")), gettext_lazy("failed")))


def _clip(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "…"


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
        summary=_clip(message),
    )


def _stored_payload(content: str) -> dict[str, Any]:
    try:
        payload = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return {}
    return payload if isinstance(payload, dict) else {}


def chip_summary(name: str, content: str, arguments: str | Mapping[str, Any]) -> str:
    """The chip under a stored call of `name` (see :meth:`ToolRegistry.chip_text`)."""
    return registry.chip_text(name, _stored_payload(content), arguments)


def tool_failed(content: str) -> bool:
    return _stored_payload(content).get("success") is False


registry = ToolRegistry()
