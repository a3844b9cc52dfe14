"""The memory manager: the built-in provider plus at most one external provider, each call
isolated so a failing or hanging provider never breaks or stalls a turn."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from django.conf import settings
from django.db import connection, connections

from sessions_app.agent.fence import build_memory_context_block

from .base import MemoryProvider

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "hermes_web.memory_providers"
#: Providers that ship with Hermes Web; enable one with HERMES_MEMORY_PROVIDER=<name>.
BUILTIN_PROVIDERS = {"local": "memory.providers.local:LocalProvider"}
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
# Background hooks (sync_turn, queue_prefetch) of one provider for one user run in the order
# they were queued, like Hermes' single daemon worker, without a hung call holding a thread
# for anyone else: the next hook is submitted when the previous one finishes.
_tails: dict[tuple[str, Any], Future[Any]] = {}
_tails_lock = threading.Lock()


def _release_db() -> None:
    """Close this thread's database connections unless a transaction is open.

    Provider calls run on pool threads (and asgiref's executor) that Django never cleans
    up after; a connection left open there would linger for the life of the process.
    Never on an event loop's thread (cheap calls like is_available run there, and Django
    refuses connection work in async context).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


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


def _load(path: str) -> type[MemoryProvider]:
    module, _, attr = path.partition(":")
    return getattr(import_module(module), attr)


def provider_paths() -> dict[str, str]:
    """Provider names that need no package: the built-in ones plus
    `HERMES_MEMORY_PROVIDERS` ({name: "module:Class"}), which may override them."""
    return {**BUILTIN_PROVIDERS, **settings.HERMES_MEMORY_PROVIDERS}


def provider_classes() -> dict[str, type[MemoryProvider]]:
    """External providers by name: installed packages' entry points, the built-in ones and
    `HERMES_MEMORY_PROVIDERS` from settings. One that fails to load is logged and left out."""
    found: dict[str, type[MemoryProvider]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found[ep.name] = ep.load()
        except Exception:
            logger.exception("memory provider entry point %s failed to load", ep.name)
    for name, path in provider_paths().items():
        try:
            found[name] = _load(path)
        except Exception:
            logger.exception("memory provider %s (%s) failed to load", name, path)
    return found


def provider_class(name: str) -> type[MemoryProvider] | None:
    """One provider class by name (no entry-point scan when settings or the built-ins
    name it)."""
    path = provider_paths().get(name)
    if path is not None:
        try:
            return _load(path)
        except Exception:
            logger.exception("memory provider %s (%s) failed to load", name, path)
            return None
    return provider_classes().get(name)


def active_provider_name() -> str:
    return settings.HERMES_MEMORY_PROVIDER


class MemoryManager:
    def __init__(self, *, user_key: Any = None) -> None:
        self.providers: list[MemoryProvider] = [BuiltinProvider()]
        self._tool_owner: dict[str, MemoryProvider] = {}
        self._user_key = user_key

    @classmethod
    def for_user(cls, user: Any) -> MemoryManager:
        """The manager with the deployment's configured external provider, if any."""
        manager = cls(user_key=getattr(user, "pk", None))
        name = active_provider_name()
        if name:
            provider_cls = provider_class(name)
            if provider_cls is None:
                logger.warning("memory provider %r is configured but not installed", name)
                return manager
            try:
                provider = provider_cls()
            except Exception:
                logger.exception("memory provider %r could not be created", name)
                return manager
            manager.add_provider(provider)
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
        finally:
            if provider.name != "builtin":
                _release_db()

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
        finally:
            _release_db()

    async def prefetch_context(self, query: str, *, session_id: str) -> tuple[str, list[str]]:
        """The fenced recall for the coming call and the names of providers that gave any.

        Skipped for trivial input; every provider is time-boxed; '' when nothing recalled.
        """
        if is_trivial(query):
            return "", []
        parts: list[str] = []
        sources: list[str] = []
        for provider in self.providers:
            text = await self._timeboxed(provider, "prefetch", query, session_id=session_id)
            if isinstance(text, str) and text.strip():
                parts.append(text.strip())
                sources.append(provider.name)
        return build_memory_context_block("\n\n".join(parts)), sources

    async def _timeboxed(
        self, provider: MemoryProvider, method: str, *args: Any, **kwargs: Any
    ) -> Any:
        """Run one provider call on the pool, waiting at most the prefetch time box. A
        provider whose call is still stuck from an earlier turn is skipped."""
        if provider.name == "builtin":
            return self._call(provider, method, *args, default=None, **kwargs)
        timeout = settings.HERMES_PROVIDER_PREFETCH_TIMEOUT
        key = (provider.name, self._user_key)
        with _stuck_lock:
            stuck = _stuck.get(key)
            if stuck is not None and not stuck.done():
                return None
            _stuck.pop(key, None)
        future = _pool.submit(self._call, provider, method, *args, default=None, **kwargs)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            logger.warning(
                "memory provider %r %s timed out after %ss", provider.name, method, timeout
            )
            with _stuck_lock:
                _stuck[key] = future
            return None

    def in_background(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Run a hook on every provider off the request path (sync_turn, queue_prefetch),
        in order per provider and user."""
        for provider in self.providers:
            if provider.name == "builtin":
                continue  # the built-in memory learns through its tool, not these hooks
            _submit_in_order(
                (provider.name, self._user_key), self._call, provider, method, *args, **kwargs
            )

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        self._each("on_turn_start", turn_number, message, **kwargs)

    async def turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        """`on_turn_start` for the chat turn: time-boxed like prefetch, so a provider that
        hangs here cannot hold the answer back either."""
        for provider in self.providers:
            await self._timeboxed(provider, "on_turn_start", turn_number, message, **kwargs)

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


def _submit_in_order(key: tuple[str, Any], fn: Any, *args: Any, **kwargs: Any) -> Future[Any]:
    done: Future[Any] = Future()

    def start(_previous: Any = None) -> None:
        inner = _pool.submit(fn, *args, **kwargs)
        inner.add_done_callback(lambda _f: finish())

    def finish() -> None:
        with _tails_lock:
            if _tails.get(key) is done:
                del _tails[key]
        done.set_result(None)

    with _tails_lock:
        previous = _tails.get(key)
        _tails[key] = done
    if previous is None:
        start()
    else:
        previous.add_done_callback(start)
    return done


def drain_background(timeout: float = 5.0) -> bool:
    """Wait until queued background hooks have run (shutdown, tests); False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with _tails_lock:
            pending = list(_tails.values())
        if not pending:
            return True
        for future in pending:
            try:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return False
    with _tails_lock:
        return not _tails


def mirror_memory_write(
    *,
    user: Any,
    session_id: str | None,
    origin: str,
    message_id: int | None,
    target: str,
    operations: list[dict[str, Any]],
    replaced: dict[int, str] | None = None,
) -> None:
    """Tell the user's external provider about a committed built-in memory write (Hermes
    mirrors add/replace/remove via `on_memory_write`). Never raises: the write stands. A slow
    provider holds the writer up for HERMES_PROVIDER_MIRROR_TIMEOUT seconds at most (logged);
    the mirror then finishes in the background, in order with the user's other hooks."""
    name = active_provider_name()
    if not name:
        return
    mirror = {
        "user": user,
        "session_id": session_id,
        "origin": origin,
        "message_id": message_id,
        "target": target,
        "operations": operations,
        "replaced": replaced,
    }
    if connection.in_atomic_block:
        # Another thread could not see this transaction's rows (inline tasks in tests).
        _mirror(**mirror)
        return
    done = _submit_in_order(
        (name, getattr(user, "pk", None)),
        _mirror,
        **mirror,
    )
    timeout = settings.HERMES_PROVIDER_MIRROR_TIMEOUT
    try:
        done.result(timeout=timeout)
    except TimeoutError:
        logger.warning(
            "mirroring a memory write to the memory provider %r took longer than %ss; "
            "it goes on in the background",
            name,
            timeout,
            extra={"provider": name, "timeout_s": timeout},
        )


def _mirror(
    *,
    user: Any,
    session_id: str | None,
    origin: str,
    message_id: int | None,
    target: str,
    operations: list[dict[str, Any]],
    replaced: dict[int, str] | None,
) -> None:
    try:
        manager = MemoryManager.for_user(user)
        if manager.external is None:
            return
        manager.initialize_all(
            session_id or "",
            user=user,
            user_id=user.pk,
            platform="web",
            agent_context="primary" if origin == "tool" else origin,
        )
        for index, op in enumerate(operations, start=1):
            if not isinstance(op, dict):
                continue
            manager.on_memory_write(
                str(op.get("action") or ""),
                target,
                op.get("content") if isinstance(op.get("content"), str) else "",
                {
                    "write_origin": origin,
                    "session_id": session_id or "",
                    "message_id": message_id,
                    "platform": "web",
                    "old_text": op.get("old_text") if isinstance(op.get("old_text"), str) else "",
                    "previous_content": (replaced or {}).get(index, ""),
                },
            )
    except Exception:
        logger.exception("mirroring a memory write to the memory provider failed")
