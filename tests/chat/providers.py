"""Memory providers used by the chat tests (an external provider is the one true external
edge of the memory system, so tests supply their own)."""

from __future__ import annotations

import threading
from typing import Any

from memory.providers import MemoryProvider

CALLS: list[tuple[str, Any]] = []
RELEASE = threading.Event()


class RecallProvider(MemoryProvider):
    name = "recall"

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        CALLS.append(("initialize", kwargs.get("user_id")))

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        CALLS.append(("prefetch", query))
        return "- Olivia works on a Django project called ledger"

    def sync_turn(
        self, user: str, assistant: str, *, session_id: str = "", messages: Any = None
    ) -> None:
        CALLS.append(("sync_turn", user))

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        CALLS.append(("on_session_end", [m.get("content") for m in messages]))


class FailingProvider(RecallProvider):
    name = "failing"

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        raise RuntimeError("provider exploded")

    def sync_turn(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("provider exploded again")


class HangingProvider(RecallProvider):
    name = "hanging"

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        RELEASE.wait(30)
        return "- too late"


class SlowWriteProvider(RecallProvider):
    """Mirrors memory writes slowly (until RELEASE), and records session ends."""

    name = "slowwrite"

    def on_memory_write(self, action: str, target: str, content: str, metadata: Any = None) -> None:
        RELEASE.wait(30)
        CALLS.append(("on_memory_write", content))
