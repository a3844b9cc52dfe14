"""The single place where Hermes talks to the language model.

Everything goes through the official ``openai`` SDK against an OpenAI-compatible Chat
Completions endpoint (OpenAI itself, or a local Ollama/vLLM/llama.cpp server via
``OPENAI_BASE_URL``). Callers only ever see the small typed surface re-exported here: stream
events, a :class:`Completed` result and a single :class:`LLMError` whose ``code`` is an
:class:`ErrorCode`.

    types     results and stream events (no SDK types)
    config    which model and endpoint, from settings
    client    build_client, stream_chat, complete
    assembly  SDK responses (streamed fragments, usage fields) into our types
    errors    ErrorCode, LLMError and the mapping from SDK/transport exceptions
"""

from __future__ import annotations

from .client import build_client, complete, stream_chat
from .config import ModelChoice, is_configured, model_for, model_name
from .errors import ErrorCode, LLMError
from .types import (
    Completed,
    ModelKind,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)

__all__ = [
    "Completed",
    "ErrorCode",
    "LLMError",
    "ModelChoice",
    "ModelKind",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "Usage",
    "build_client",
    "complete",
    "is_configured",
    "model_for",
    "model_name",
    "stream_chat",
]
