"""A non-streaming tool loop for work nobody watches: the background skill/memory review and
the pre-compression memory flush.

    result = await run_offline_loop(
        messages=[...],                       # system/user/assistant/tool dicts, wire format
        ctx=ToolContext(user=owner, session_id=sid, origin="review"),
        allowed_tools={"memory", "skill_manage"},
    )
    result.text          # the model's final answer ("" if it never gave one)
    result.tool_results  # [ToolOutcome(name, ok, summary, notice, arguments)]
    result.usage         # summed over every model call

How it behaves:
- Each step calls `llm.complete` with the schemas of the allowed tools that are registered.
  A tool call runs through `registry.dispatch` (as in a live turn) with
  `allowed=allowed_tools`, so a model asking for anything else gets the registry's "not
  available" result and nothing runs — that is the runtime denial.
- Assistant and tool messages are appended to the loop's own copy of `messages` only.
  Nothing is persisted: callers decide what, if anything, to store.
- It stops at the first answer without tool calls, or after `max_iterations` model calls
  (the tools of the last call still run; `stopped` says which).
- `LLMError` propagates to the caller, with whatever tools already ran having committed.

Handlers are sync and use the ORM, so they run through `sync_to_async(thread_sensitive=True)`:
from a Celery task (`async_to_sync(run_offline_loop)(...)`) or a test they run on the
caller's own thread and DB connection, and from an async consumer on Django's shared sync
thread — never on pool threads that would each keep a database connection open.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from asgiref.sync import sync_to_async

from core.exceptions import ServiceError

from . import llm
from .tools import ToolContext, parse_arguments, registry

__all__ = ["OfflineLoopResult", "ToolOutcome", "run_offline_loop"]


@dataclass(frozen=True)
class ToolOutcome:
    name: str
    ok: bool
    summary: str
    notice: tuple[str, str] | None
    arguments: dict[str, Any] | str
    #: What the tool told the model (the payload of its ToolResult).
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class OfflineLoopResult:
    text: str
    tool_results: list[ToolOutcome]
    usage: llm.Usage
    iterations: int
    stopped: Literal["final", "max_iterations"]
    #: The working conversation, including the loop's assistant and tool messages.
    messages: list[dict[str, Any]]


def _arguments(raw: str) -> dict[str, Any] | str:
    """The arguments as the caller's report shows them: parsed, or the raw text if invalid."""
    try:
        return parse_arguments(raw)
    except ServiceError:
        return raw


async def run_offline_loop(
    *,
    messages: list[dict[str, Any]],
    ctx: ToolContext,
    allowed_tools: set[str],
    max_iterations: int = 16,
    entry: llm.ModelChoice,
    temperature: float | None = None,
) -> OfflineLoopResult:
    """Run the model ``entry`` (resolved by the sync caller, usually
    ``llm.model_for("summary")``) with tools until it answers without calling one."""
    working = [dict(m) for m in messages]
    allowed = set(allowed_tools)
    schemas = registry.schemas(sorted(allowed))
    dispatch = sync_to_async(registry.dispatch, thread_sensitive=True)
    outcomes: list[ToolOutcome] = []
    usage = llm.Usage()
    iterations = 0
    while iterations < max(1, max_iterations):
        iterations += 1
        completed = await llm.complete(
            messages=working, tools=schemas or None, entry=entry, temperature=temperature
        )
        usage += completed.usage
        if not completed.tool_calls:
            working.append({"role": "assistant", "content": completed.text})
            return OfflineLoopResult(
                text=completed.text,
                tool_results=outcomes,
                usage=usage,
                iterations=iterations,
                stopped="final",
                messages=working,
            )
        working.append(completed.assistant_message())
        for call in completed.tool_calls:
            result = await dispatch(ctx, call.name, call.arguments, allowed=allowed)
            outcomes.append(
                ToolOutcome(
                    name=call.name,
                    ok=result.ok,
                    summary=result.summary,
                    notice=result.notice,
                    arguments=_arguments(call.arguments),
                    payload=result.payload,
                )
            )
            working.append({"role": "tool", "tool_call_id": call.id, "content": result.content()})
    return OfflineLoopResult(
        text="",
        tool_results=outcomes,
        usage=usage,
        iterations=iterations,
        stopped="max_iterations",
        messages=working,
    )
