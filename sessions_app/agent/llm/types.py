"""What a model call gives back: stream events, the completed result, token usage.

Plain frozen dataclasses with no dependency on the openai SDK, so callers (the turn loop,
compression, extraction, cost accounting) never see the SDK's own types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ModelKind = Literal["chat", "summary"]
Message = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # part of prompt_tokens served from the provider's prompt cache
    reasoning_tokens: int = 0  # part of completion_tokens spent on hidden reasoning

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text exactly as the model produced it (may be invalid JSON)

    def to_message(self) -> dict[str, Any]:
        """The wire shape used inside an assistant message's ``tool_calls``."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Completed:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None  # None if the stream ended without saying why
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    reasoning: str = ""

    def assistant_message(self) -> dict[str, Any]:
        """The assistant message to append to the history before sending tool results."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message


StreamEvent = TextDelta | ReasoningDelta | Completed
