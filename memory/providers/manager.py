"""The memory manager: the built-in provider plus at most one external provider, each call
isolated so a failing or hanging provider never breaks or stalls a turn."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from django.conf import settings

from ..fence import build_memory_context_block
from .base import MemoryProvider

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "hermes_web.memory_providers"
#: Tool names of the agent's own tools; a provider may not take them over.
CORE_TOOL_NAMES = frozenset(
    {"memory", "session_search", "skills_list", "skill_view", "skill_manage"}
)
_TRIVIAL = re.compile(
    r"^(yes|no|ok|okay|sure|thanks|thank you|y|n|yep|nope|yeah|nah|hi|hey|hello|yo|sup|"
    r"continue|go ahead|do it|proceed|got it|cool|nice|great|done|next|lgtm|k)[\s\W]*$",
    re.IGNORECASE,
)

# Provider calls run on a small shared pool so a hung call cannot block the event loop.
# A provider whose prefetch timed out is skipped until that call returns.
_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="memory-provider")
_stuck: dict[tuple[str, Any], Future[str]] = {}
_stuck_lock = threading.Lock()


def is_trivial(text: str) -> bool:
    stripped = (text or "").strip()
    return not stripped or stripped.startswith("/") or bool(_TRIVIAL.match(stripped))


class BuiltinProvider(MemoryProvider):
    """The built-in MEMORY/USER store. Its recall is the frozen snapshot in the system
    prompt and its tool is `memory` in the tool registry, so it adds nothing per turn."""

    name = "builtin"

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self.session_id = session_id

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []


def provider_classes() -> dict[str, type[MemoryProvider]]:
    """External providers by name: installed packages' entry points plus
    `HERMES_MEMORY_PROVIDERS` ({name: "module:Class"}) from settings."""
    found: dict[str, type[MemoryProvider]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found[ep.name] = ep.load()
        except Exception:
            logger.exception("memory provider entry point %s failed to load", ep.name)
    for name, path in getattr(settings, "HERMES_MEMORY_PROVIDERS", {}).items():
        module, _, attr = path.partition(":")
        found[name] = getattr(import_module(module), attr)
    return found


class MemoryManager:
    def __init__(self, *, user_key: Any = None) -> None:
        self.providers: list[MemoryProvider] = [BuiltinProvider()]
        self._tool_owner: dict[str, MemoryProvider] = {}
        self._user_key = user_key

    @classmethod
    def for_user(cls, user: Any) -> MemoryManager:
        """The manager with the deployment's configured external provider, if any."""
        manager = cls(user_key=getattr(user, "pk", None))
        name = getattr(settings, "HERMES_MEMORY_PROVIDER", "")
        if name:
            provider_cls = provider_classes().get(name)
            if provider_cls is None:
                logger.warning("memory provider %r is configured but not installed", name)
            else:
                manager.add_provider(provider_cls())
        return manager

    @property
    def external(self) -> MemoryProvider | None:
        return self.providers[1] if len(self.providers) > 1 else None

    def add_provider(self, provider: MemoryProvider) -> bool:
        if provider.name == "builtin":
            logger.warning("the name 'builtin' is reserved for the built-in provider")
            return False
        if self.external is not None:
            logger.warning(
                "memory provider %r refused: %r is already active (only one external provider)",
                provider.name,
                self.external.name,
            )
            return False
        available = self._call(provider, "is_available", default=False)
        if not available:
            reason = self._call(provider, "unavailable_reason", default="")
            logger.warning("memory provider %r is not available: %s", provider.name, reason)
            return False
        self.providers.append(provider)
        for schema in self._call(provider, "get_tool_schemas", default=[]) or []:
            spec = schema.get("function", schema) if isinstance(schema, dict) else {}
            tool_name = spec.get("name")
            if not tool_name:
                continue
            if tool_name in CORE_TOOL_NAMES:
                logger.warning(
                    "provider %r may not override core tool %r", provider.name, tool_name
                )
            elif tool_name not in self._tool_owner:
                self._tool_owner[tool_name] = provider
        return True

    # --- isolation ----------------------------------------------------------------------
    def _call(
        self, provider: MemoryProvider, method: str, *args: Any, default: Any = None, **kwargs: Any
    ) -> Any:
        try:
            return getattr(provider, method)(*args, **kwargs)
        except Exception:
            logger.exception("memory provider %r failed in %s", provider.name, method)
            return default

    def _each(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        return [self._call(p, method, *args, **kwargs) for p in self.providers]

    # --- lifecycle ----------------------------------------------------------------------
    def initialize_all(self, session_id: str, **kwargs: Any) -> None:
        self._each("initialize", session_id, **kwargs)

    def system_prompt_block(self) -> str:
        blocks = [b for b in self._each("system_prompt_block") if isinstance(b, str) and b]
        return "\n\n".join(blocks)

    def tool_schemas(self) -> list[dict[str, Any]]:
        schemas = []
        for name, provider in self._tool_owner.items():
            for schema in self._call(provider, "get_tool_schemas", default=[]) or []:
                spec = schema.get("function", schema)
                if spec.get("name") == name:
                    schemas.append({"type": "function", "function": spec})
        return schemas

    def handles_tool(self, name: str) -> bool:
        return name in self._tool_owner

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        provider = self._tool_owner[name]
        try:
            return provider.handle_tool_call(name, args, **kwargs)
        except Exception as exc:
            logger.exception("memory provider %r tool %s failed", provider.name, name)
            return f'{{"success": false, "error": "{type(exc).__name__} in {name}"}}'

    async def prefetch_context(self, query: str, *, session_id: str) -> tuple[str, list[str]]:
        """The fenced recall for the coming call and the names of providers that gave any.

        Skipped for trivial input; every provider is time-boxed; '' when nothing recalled.
        """
        if is_trivial(query):
            return "", []
        timeout = float(getattr(settings, "HERMES_PROVIDER_PREFETCH_TIMEOUT", 8.0))
        parts: list[str] = []
        sources: list[str] = []
        for provider in self.providers:
            text = await self._timeboxed(provider, query, session_id, timeout)
            if text.strip():
                parts.append(text.strip())
                sources.append(provider.name)
        return build_memory_context_block("\n\n".join(parts)), sources

    async def _timeboxed(
        self, provider: MemoryProvider, query: str, session_id: str, timeout: float
    ) -> str:
        key = (provider.name, self._user_key)
        with _stuck_lock:
            stuck = _stuck.get(key)
            if stuck is not None and not stuck.done():
                return ""
            _stuck.pop(key, None)
        future = _pool.submit(
            self._call, provider, "prefetch", query, session_id=session_id, default=""
        )
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            logger.warning(
                "memory provider %r prefetch timed out after %ss", provider.name, timeout
            )
            with _stuck_lock:
                _stuck[key] = future
            return ""
        return result if isinstance(result, str) else ""

    def in_background(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Run a hook on every provider off the request path (sync_turn, queue_prefetch)."""
        for provider in self.providers:
            _pool.submit(self._call, provider, method, *args, **kwargs)

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        self._each("on_turn_start", turn_number, message, **kwargs)

    def on_session_switch(self, new_session_id: str, **kwargs: Any) -> None:
        self._each("on_session_switch", new_session_id, **kwargs)

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        self._each("on_session_end", messages)

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        notes = [n for n in self._each("on_pre_compress", messages) if isinstance(n, str) and n]
        return "\n\n".join(notes)

    def on_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        for provider in self.providers[1:]:
            self._call(provider, "on_memory_write", action, target, content, metadata)

    def shutdown_all(self) -> None:
        for provider in reversed(self.providers):
            self._call(provider, "shutdown")
