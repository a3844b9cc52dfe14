"""Publishing events to a user's open browser tabs through the channel layer.

Every socket of a user joins the user's group; every socket that follows a conversation
joins that conversation's group. Producers (the turn runner, Celery tasks) publish here
and never talk to sockets directly, so they work from any process.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from redis.exceptions import RedisError


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def session_group(session_id: str) -> str:
    return f"session.{session_id}"


class RealtimeUnavailable(Exception):
    """The channel layer cannot be reached (Valkey/Redis down or restarting)."""


#: What a channel layer raises when its server is gone.
LAYER_ERRORS: tuple[type[BaseException], ...] = (OSError, TimeoutError, RedisError)


async def apublish(group: str, event: dict[str, Any]) -> None:
    """Send `event` (a websocket message body) to every socket in `group`; raises
    RealtimeUnavailable when the channel layer is down."""
    layer = get_channel_layer()
    try:
        await layer.group_send(group, {"type": "client.event", "event": event})
    except LAYER_ERRORS as exc:
        raise RealtimeUnavailable(str(exc)) from exc


def publish(group: str, event: dict[str, Any]) -> None:
    async_to_sync(apublish)(group, event)


def notice_to_user(*, user_id: int, kind: str, text: str, session_id: str | None = None) -> None:
    publish(
        user_group(user_id), {"type": "notice", "session": session_id, "kind": kind, "text": text}
    )
