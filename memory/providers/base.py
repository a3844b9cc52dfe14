"""The interface a memory provider implements (the lifecycle of Hermes' providers).

Providers are instantiated per conversation turn runner and called by the MemoryManager,
which isolates every call: an exception or a hang in a provider never breaks a turn.
"""

from __future__ import annotations

import abc
from typing import Any


class MemoryProvider(abc.ABC):
    # Optional hooks below are deliberately empty defaults; providers override what they use.
    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @abc.abstractmethod
    def is_available(self) -> bool:
        """Whether the provider can run here. Must not touch the network."""

    @abc.abstractmethod
    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """Bind to a conversation. kwargs: user_id, user, platform, agent_context
        ('primary' | 'subagent' | 'review' | 'flush'; write only when primary),
        parent_session_id."""

    @abc.abstractmethod
    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """Tools this provider offers: [{"name", "description", "parameters"}]."""

    # --- optional members -------------------------------------------------------------
    def unavailable_reason(self) -> str:
        return ""

    def system_prompt_block(self) -> str:
        return ""

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """Recall for the coming model call; must return quickly (time-boxed)."""
        return ""

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """Start computing the next turn's recall in the background."""

    def sync_turn(
        self, user: str, assistant: str, *, session_id: str = "", messages: Any = None
    ) -> None:
        """Learn from a finished turn."""

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError(f"{self.name} has no tool {name!r}")

    def shutdown(self) -> None: ...

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        """Before the turn's recall (time-boxed). kwargs: message_id (the user message,
        which identifies the turn), session_id."""

    def on_session_end(self, messages: list[dict[str, Any]]) -> None: ...

    def on_session_switch(
        self,
        new_session_id: str,
        *,
        parent_session_id: str = "",
        reset: bool = False,
        rewound: bool = False,
        **kwargs: Any,
    ) -> None: ...

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        return ""

    def on_delegation(
        self, task: str, result: str, *, child_session_id: str = "", **kwargs: Any
    ) -> None: ...

    def on_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None: ...

    def get_config_schema(self) -> dict[str, Any]:
        return {}

    def save_config(self, values: dict[str, Any]) -> None: ...
