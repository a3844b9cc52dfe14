"""Setting a chat turn up: the claim's trip to the database thread with the setup's reads
(`turn_open`), then, in the turn's task (`prepare`), the announcement, the memory providers,
the frozen prompt, the recall fenced onto the user's message and the tools on offer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from accounts.language import asaid_to
from core.realtime import apublish, session_group

from .. import answers, branches, selectors, services
from ..compression import COMPRESSED_NOTICE
from ..models import API_SOURCE
from .extensions import MemoryProviders, memory_providers_external, memory_providers_for
from .prompt import session_freeze_prompt, tool_names_for, turn_facts
from .tools import ToolContext, registry
from .turn import Setup, Turn


def turn_open(*, user: Any, **begin: Any) -> services.TurnStart:
    """`services.turn_begin`, then, with the conversation leased, the setup's reads (one trip
    to the database thread where there were two; every turn of the process queues there).
    The quota and the profile come with the claim's reads, the path the model is sent in
    the claim's. A chat whose model is gone is switched by the turn itself, once the tab
    listens."""
    start = services.turn_begin(user=user, **begin)
    if start.lease is None:
        return start
    try:
        facts = turn_facts(
            session=start.session,
            user=user,
            recalling=start.user_message is not None,
            may_switch=False,
            profile=start.profile,
            path=start.path,
        )
        if facts is not None and not facts.prompt and not memory_providers_external():
            # A new conversation with only the built-in memory: nothing a provider says
            # goes into its prompt, which is frozen here rather than in a trip of its own.
            prompt = session_freeze_prompt(
                session=start.session, provider_block="", profile=facts.profile
            )
            facts = dataclasses.replace(facts, prompt=prompt)
    except Exception:  # noqa: BLE001 - the turn reads them again, and reports a failure
        return start
    return dataclasses.replace(start, facts=facts, path=None)  # the rows are in the facts


def turn_warm(*, user: Any, session_id: str) -> None:
    """A later turn's reads of `turn_open`, without claiming anything: run on a database
    connection just opened between turns (core.db.renew), so that the person's next turn
    does not meet a new backend's empty catalog caches. The same statements the claim will
    run (the profile exists by then: its read writes nothing)."""
    session, _quota, profile = selectors.turn_session_read(user=user, session_id=session_id)
    path, _tip = branches.path_with_tip(session_id=session.pk)
    turn_facts(
        session=session, user=user, recalling=False, may_switch=False, profile=profile, path=path
    )


async def prepare(turn: Turn) -> Setup:
    """Announce the turn, start the memory providers, load or freeze the system prompt,
    fence the recall onto the user's message and choose the tools on offer."""
    session, user = turn.start.session, turn.user
    await _announce(turn)
    facts = turn.start.facts or await database_sync_to_async(turn_facts)(
        session=session, user=user, recalling=turn.start.user_message is not None
    )
    manager = memory_providers_for(user)
    await _providers_run(
        manager,
        manager.initialize_all,
        session.pk,
        user=user,
        user_id=user.pk,
        platform=API_SOURCE if session.source == API_SOURCE else "web",
        agent_context="primary",
        parent_session_id=session.parent_id or "",
    )
    prompt = facts.prompt or await _freeze_prompt(session, manager)
    messages: list[dict[str, Any]] | None = [
        {"role": "system", "content": prompt},
        *facts.messages[1:],
    ]
    if facts.user_turns and await _recall(turn, manager, facts.user_turns):
        messages = None  # the user's message now carries its recall: read it again
    tool_names = tool_names_for(session=session, profile=facts.profile)
    tools = registry.schemas(tool_names) + (manager.tool_schemas() if facts.memory_on else [])
    ctx = ToolContext(
        user=user,
        session_id=session.pk,
        origin="tool",
        providers=manager if facts.memory_on else None,
    )
    return Setup(
        manager, facts.model, facts.memory_on, prompt, tools, frozenset(tool_names), ctx, messages
    )


async def _providers_run(
    manager: MemoryProviders, call: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    """A providers' hook: here when only the built-in memory runs (its hooks do nothing
    costly), else on a worker thread, as an external provider may wait on the network. A
    thread hop costs a busy process more than the hook: the thread waits for the
    interpreter lock, and the turn for the thread."""
    if manager.external is None:
        return call(*args, **kwargs)
    return await sync_to_async(call, thread_sensitive=False)(*args, **kwargs)


async def _announce(turn: Turn) -> None:
    start = turn.start
    if start.created:
        await turn.events.emit(
            {
                "type": "session.started",
                "title": start.session.title,
                "temporary": start.session.temporary,
            }
        )
    if start.switched_from:
        # The tab still shows the compressed part; tell it where the chat went on.
        await apublish(
            session_group(start.session.pk),
            {
                "type": "notice",
                "session": start.switched_from,
                "kind": "compressed",
                "text": await asaid_to(turn.user.pk, COMPRESSED_NOTICE),
                "new_session": start.session.pk,
            },
        )


async def _freeze_prompt(session: Any, manager: MemoryProviders) -> str:
    block = await _providers_run(manager, manager.system_prompt_block)
    return await database_sync_to_async(session_freeze_prompt)(
        session=session, provider_block=block
    )


async def _recall(turn: Turn, manager: MemoryProviders, user_turns: int) -> bool:
    """Providers learn which message this turn answers (the `user_turns`-th of the path),
    then their prefetch (time-boxed) is stored as the user message's fenced context (True
    when there was any).

    Precondition: the turn has a user message (not a regeneration) and memory is on."""
    message = turn.start.user_message
    assert message is not None
    await manager.turn_start(
        user_turns, turn.user_text, message_id=message.id, session_id=turn.session_id
    )
    fence, _sources = await manager.prefetch_context(turn.user_text, session_id=turn.session_id)
    if fence:
        await database_sync_to_async(answers.user_message_set_context)(
            message_id=message.id, context_block=fence
        )
    return bool(fence)
