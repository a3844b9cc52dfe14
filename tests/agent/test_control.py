"""A running turn's listener for stop and resync requests (sessions_app/agent/control.py),
on the configured channel layer."""

from __future__ import annotations

import asyncio

import pytest

from sessions_app.agent.control import TurnControl, request_stop


async def _stop_right_after_start(*, wait_for_listener: bool) -> bool:
    """A turn whose tab asks it to stop at once; True when the turn was cancelled."""
    turn = asyncio.create_task(asyncio.sleep(30))
    control = TurnControl("20261206_000000_stop01", "token")
    control.start(turn, None, lambda: None)
    if wait_for_listener:
        await control.listening()
    await request_stop("20261206_000000_stop01")
    try:
        await asyncio.wait_for(asyncio.shield(turn), timeout=2)
    except asyncio.CancelledError:
        return True
    except TimeoutError:
        return False
    finally:
        turn.cancel()
        await control.stop()
    return False


@pytest.mark.django_db
def test_a_stop_sent_as_soon_as_the_turn_listens_cancels_it():
    # The tab shows the stop button with the first delta; the turn waits for `listening()`
    # before its first model call. Without that wait this stop can reach nobody (on the
    # in-memory layer always: the listener has not run when the stop is sent).
    assert asyncio.run(_stop_right_after_start(wait_for_listener=True))


@pytest.mark.django_db
def test_listening_returns_when_the_listener_failed():
    async def scenario() -> None:
        control = TurnControl("20261206_000000_stop02", "token")
        control._task = asyncio.create_task(asyncio.sleep(0))  # a listener that ended
        await asyncio.wait_for(control.listening(), timeout=2)

    asyncio.run(scenario())
