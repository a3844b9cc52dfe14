"""Turning responses into our types: streamed tool-call fragments into whole
:class:`ToolCall` s, provider-specific usage and reasoning fields into ours. Each helper
reads the SDK's response objects and the stream's chunks, which arrive as plain JSON (see
client.stream_chat), alike."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .types import ToolCall, Usage


def part(obj: Any, name: str) -> Any:
    """Field `name` of a JSON object (a mapping) or of an SDK object (an attribute)."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def fallback_call_id() -> str:
    # Some local servers omit ids, but the follow-up tool message must reference one.
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAccumulator:
    """Reassembles streamed tool calls, keyed by their ``index``."""

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, delta: Any) -> None:
        index = part(delta, "index")
        call_id = part(delta, "id") or ""
        if index is None:
            # Not spec-compliant, but seen in the wild: locate the call by id, else the last one.
            index = next((i for i, c in self._calls.items() if call_id and c.id == call_id), None)
            if index is None:
                index = len(self._calls) if call_id or not self._calls else max(self._calls)
        current = self._calls.get(index)
        if current is not None and call_id and current.id and current.id != call_id:
            # A new id on a used index means a separate call from a server that reuses index 0.
            index = max(self._calls) + 1
            current = None
        if current is None:
            current = self._calls[index] = _PartialCall()
        if call_id and not current.id:
            current.id = call_id
        function = part(delta, "function")
        if function is not None:
            name = part(function, "name")
            if name and name != current.name:
                current.name = name if not current.name else current.name + name
            arguments = part(function, "arguments")
            if arguments:
                current.arguments.append(arguments)

    def result(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(
                id=call.id or fallback_call_id(), name=call.name, arguments="".join(call.arguments)
            )
            for _, call in sorted(self._calls.items())
        )


def reasoning_of(obj: Any) -> str:
    # Outside the OpenAI schema: DeepSeek/vLLM send reasoning_content, OpenRouter/Ollama reasoning.
    for attr in ("reasoning_content", "reasoning"):
        value = part(obj, attr)
        if isinstance(value, str) and value:
            return value
    return ""


def usage_from(raw: Any) -> Usage:
    prompt_details = part(raw, "prompt_tokens_details")
    completion_details = part(raw, "completion_tokens_details")
    cached = part(prompt_details, "cached_tokens") if prompt_details is not None else None
    if cached is None:
        cached = part(raw, "prompt_cache_hit_tokens")  # DeepSeek's spelling
    reasoning = part(completion_details, "reasoning_tokens") if completion_details else None
    return Usage(
        prompt_tokens=int(part(raw, "prompt_tokens") or 0),
        completion_tokens=int(part(raw, "completion_tokens") or 0),
        cached_tokens=int(cached or 0),
        reasoning_tokens=int(reasoning or 0),
    )
