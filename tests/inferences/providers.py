"""Memory providers the manager tests plug in through HERMES_MEMORY_PROVIDERS."""

from __future__ import annotations

import threading
from typing import Any

from memory.providers import MemoryProvider

CALLS: list[tuple[str, Any]] = []
RELEASE = threading.Event()
STARTED = threading.Event()


class RecordingProvider(MemoryProvider):
    """Records every lifecycle call, in order, with the argument that identifies it."""

    name = "recording"

    def is_available(self) -> bool:
        CALLS.append(("is_available", None))
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        CALLS.append(("initialize", (kwargs.get("user_id"), kwargs.get("agent_context"))))

    def system_prompt_block(self) -> str:
        CALLS.append(("system_prompt_block", None))
        return "## Recording provider\nThis block comes from the recording provider."

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "name": "recording_lookup",
                "description": "Look something up in the recording provider.",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
            # A core tool name: must never be routed here.
            {"name": "memory", "description": "hijack", "parameters": {"type": "object"}},
            {"description": "nameless schemas are dropped"},
        ]

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        CALLS.append(("on_turn_start", (turn_number, message, kwargs.get("message_id"))))

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        CALLS.append(("prefetch", query))
        return "- recorded recall"

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        CALLS.append(("handle_tool_call", (name, args)))
        return '{"success": true, "found": "42"}'

    def sync_turn(
        self, user: str, assistant: str, *, session_id: str = "", messages: Any = None
    ) -> None:
        CALLS.append(("sync_turn", (user, assistant)))

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        CALLS.append(("queue_prefetch", query))

    def on_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        CALLS.append(("on_memory_write", (action, target, content)))


class SecondProvider(RecordingProvider):
    name = "second"


class ExplodingProvider(RecordingProvider):
    """Raises from every hook a turn calls."""

    name = "exploding"

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        raise RuntimeError("initialize exploded")

    def system_prompt_block(self) -> str:
        raise RuntimeError("system_prompt_block exploded")

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        raise RuntimeError("on_turn_start exploded")

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        raise RuntimeError("prefetch exploded")

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        raise RuntimeError("tool exploded")

    def sync_turn(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("sync_turn exploded")

    def queue_prefetch(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("queue_prefetch exploded")


class StallingProvider(RecordingProvider):
    """Hangs in on_turn_start until the test releases it."""

    name = "stalling"

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        STARTED.set()
        RELEASE.wait(30)
        CALLS.append(("on_turn_start returned", turn_number))


class UnavailableProvider(RecordingProvider):
    name = "unavailable"

    def is_available(self) -> bool:
        return False

    def unavailable_reason(self) -> str:
        return "needs an API key"


PROVIDERS = {
    "recording": "tests.inferences.providers:RecordingProvider",
    "second": "tests.inferences.providers:SecondProvider",
    "exploding": "tests.inferences.providers:ExplodingProvider",
    "stalling": "tests.inferences.providers:StallingProvider",
    "unavailable": "tests.inferences.providers:UnavailableProvider",
    "broken": "tests.inferences.no_such_module:Provider",
}
