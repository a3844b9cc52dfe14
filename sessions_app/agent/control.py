"""Reaching a running turn from any process: stop and resync requests go to the session's
control group, where the turn's listener (:class:`TurnControl`) acts on them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from channels.layers import get_channel_layer

from core.leases import Lease

from ..models import Message
from .stream import StreamState, TurnEvents


def control_group(session_id: str) -> str:
    """Where stop and resync requests for a running turn are sent."""
    return f"turnctl.{session_id}"


async def request_stop(session_id: str) -> None:
    await get_channel_layer().group_send(control_group(session_id), {"type": "turn.stop"})


async def request_sync(session_id: str, reply_channel: str) -> None:
    await get_channel_layer().group_send(
        control_group(session_id), {"type": "turn.sync", "reply_to": reply_channel}
    )


class TurnControl:
    """The listener of one turn: cancels the turn on stop, answers sync with a snapshot.

    Lifecycle: :meth:`start` when the turn starts; :meth:`hand_over` as soon as the turn
    releases its claim (later stop/sync requests belong to the next turn); :meth:`stop` once
    the turn's work, including its after-turn hooks, is over.
    """

    def __init__(self, session_id: str, token: str) -> None:
        self.session_id = session_id
        self.token = token
        self._joined = asyncio.Event()
        self._ending = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(
        self, turn: asyncio.Task[Any] | None, events: TurnEvents, current: Callable[[], StreamState]
    ) -> None:
        """Start listening (call from the turn's own task, on its event loop)."""
        self._task = asyncio.get_running_loop().create_task(self._listen(turn, events, current))

    async def listening(self) -> None:
        """Return once stop and sync requests reach this turn (its listener joined the
        control group), or its listener failed: a tab stops the turn as soon as it sees
        the answer stream, and a stop sent before the join would reach nobody."""
        task = self._task
        if task is None or self._joined.is_set():
            return
        joined = asyncio.ensure_future(self._joined.wait())
        await asyncio.wait({joined, task}, return_when=asyncio.FIRST_COMPLETED)
        joined.cancel()

    def hand_over(self) -> None:
        self._ending.set()

    async def stop(self) -> None:
        """End the listener with a message instead of cancel() once it is waiting in
        receive(): channels_redis lets one waiter per process pop for all of the process's
        channels, and cancelling it mid-pop drops a message meant for another tab."""
        task = self._task
        if task is None:
            return
        if self._joined.is_set() and not task.done():
            with contextlib.suppress(Exception):
                await get_channel_layer().group_send(
                    control_group(self.session_id), {"type": "turn.end", "token": self.token}
                )
                await asyncio.wait_for(asyncio.shield(task), timeout=2)
        task.cancel()

    async def _listen(
        self, turn: asyncio.Task[Any] | None, events: TurnEvents, current: Callable[[], StreamState]
    ) -> None:
        layer = get_channel_layer()
        # The default prefix, like the consumers' channels: channels_redis reads every
        # process-local channel through one lock, and a waiter on another prefix ("turn.")
        # holds it on a different Redis list, so this process's tabs got no deltas until the
        # turn ended.
        channel = await layer.new_channel()
        group = control_group(self.session_id)
        await layer.group_add(group, channel)
        self._joined.set()
        try:
            while True:
                message = await layer.receive(channel)
                if message.get("type") == "turn.end":
                    if message.get("token") == self.token:
                        return  # this turn is over (a later turn's listener ignores it)
                elif self._ending.is_set():
                    continue  # stop and sync requests now belong to the next turn
                elif message.get("type") == "turn.stop" and turn is not None:
                    turn.cancel()
                elif message.get("type") == "turn.sync" and message.get("reply_to"):
                    await layer.send(message["reply_to"], self._snapshot(events, current()))
        finally:
            with contextlib.suppress(Exception):
                await layer.group_discard(group, channel)

    def _snapshot(self, events: TurnEvents, state: StreamState) -> dict[str, Any]:
        return {
            "type": "client.event",
            "event": {
                "type": "session.snapshot",
                "session": self.session_id,
                "message_id": state.message_id,
                # Unsent text follows as the next delta, after this seq.
                "text": state.text[: len(state.text) - len(state.unsent)],
                "seq": events.last_seq,
                "status": Message.Status.STREAMING,
            },
        }


def stop_when_lost(lease: Lease, task: asyncio.Task[Any] | None) -> Callable[[Any], None]:
    """A done-callback for the turn's heartbeat: it only ends by itself when a renewal found
    the lease taken over, and then the turn must stop so that two writers never race."""

    def stop(heartbeat: asyncio.Task[None]) -> None:
        if not heartbeat.cancelled() and lease.lost.is_set() and task is not None:
            task.cancel()

    return stop
