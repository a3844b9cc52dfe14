"""One running chat turn, as the runner and its setup share it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from .. import services
from . import llm
from .control import TurnControl
from .extensions import MemoryProviders
from .stream import StreamState, TurnEvents
from .tools import ToolContext


@dataclass
class Turn:
    """One running turn: what it answers, where it publishes, the message being streamed."""

    start: services.TurnStart
    user: Any
    events: TurnEvents
    state: StreamState
    control: TurnControl
    heartbeat: asyncio.Task[None] | None = None
    tool_iterations: int = 0
    #: The answer is saved and the conversation freed (see runner._close): nothing more to
    #: write but the after-turn checks, which read the usage of its model call.
    closed: bool = False
    final_usage: llm.Usage | None = None

    @property
    def session_id(self) -> str:
        return self.start.session.pk

    @property
    def user_text(self) -> str:
        return self.start.user_message.content if self.start.user_message else ""


@dataclass(frozen=True)
class Setup:
    """What `prepare` gathered for the model calls of a turn."""

    manager: MemoryProviders
    #: The conversation's model (endpoint, key, id, window, prices) for every call of the turn.
    model: llm.ModelChoice
    memory_on: bool
    prompt: str
    tools: list[dict[str, Any]]
    #: The registry tools on offer (provider tools are allowed through `ctx.providers`).
    allowed: frozenset[str]
    ctx: ToolContext
    #: The first model call's messages, read with the setup's facts (None: read them then).
    messages: list[dict[str, Any]] | None
