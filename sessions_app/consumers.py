"""The chat websocket at /ws/chat/. It authenticates, checks ownership and routes; the
turn itself runs in the runner, independently of this socket.

Client → server: chat.send {session|null, text}, chat.stop {session}, chat.subscribe
{session}, chat.regenerate {session, message_id?}, chat.edit {session, message_id, text},
chat.branch {session, message_id}. Server → client: see ARCHITECTURE.md and README.

What this socket says itself (refusals, notices) is in the person's language, read when it
is said: the consumer runs outside LocaleMiddleware, and a person who changes language on
the Account page reads the next refusal in it without reopening the tab.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from accounts.language import asaid_to, aspeaking_to
from core.exceptions import ServiceError, Text, lazy_format
from core.realtime import LAYER_ERRORS, session_group, user_group

from . import services, turn_claim
from .agent import runner

logger = logging.getLogger(__name__)


class ChatConsumer(AsyncJsonWebsocketConsumer):
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except LAYER_ERRORS:
            # The channel layer (Valkey/Redis) went away under this socket: say so before
            # closing, so the tab shows why and reconnects (a running answer keeps its text).
            logger.warning("channel layer lost; closing a chat socket")
            user = scope.get("user")
            event = {
                "type": "error",
                "session": None,
                "code": "realtime_unavailable",
                "message": await asaid_to(
                    user.pk if user is not None and user.is_authenticated else None,
                    _(
                        "Live updates stopped (the server lost its message broker). "
                        "Reconnecting… your messages and answers so far are saved."
                    ),
                ),
            }
            await send({"type": "websocket.send", "text": json.dumps(event)})
            await send({"type": "websocket.close", "code": 1013})

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its trip to the database thread before every handler
        (to close obsolete connections): every event a turn sends this tab, each delta, took
        that trip, behind all the work of the process's turns queued there. Every database
        call of these handlers goes through `database_sync_to_async`, which closes obsolete
        connections around its own work."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            await self.close(code=4401)
            return
        self.user = user
        self.groups_joined: set[str] = set()
        # Accept first: with the channel layer down the join below fails, and only an
        # accepted socket can tell the tab why (a refused handshake was a bare 500).
        await self.accept()
        await self._join(user_group(user.pk))

    async def _join(self, group: str) -> None:
        if group not in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.add(group)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        size = len(text_data or "") + len(bytes_data or b"")
        if size > settings.HERMES_WS_MAX_MESSAGE_BYTES:
            await self._error(
                None, "message_too_large", _("That message is too large to send over the socket.")
            )
            return
        try:
            await super().receive(text_data=text_data, bytes_data=bytes_data, **kwargs)
        except ValueError:  # not JSON
            await self._error(None, "bad_request", _("Messages must be JSON objects."))

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            await self._error(None, "bad_request", _('Messages are JSON objects with a "type".'))
            return
        handler = {
            "chat.send": self._send,
            "chat.stop": self._stop,
            "chat.subscribe": self._subscribe,
            "chat.regenerate": self._regenerate,
            "chat.edit": self._edit,
            "chat.branch": self._branch,
        }.get(content["type"])
        session_id = content.get("session")
        if handler is None:
            await self._error(
                session_id,
                "bad_request",
                lazy_format(_("Unknown message type %(type)s."), type=repr(content["type"])),
            )
            return
        try:
            await handler(content)
        except ServiceError as exc:
            with await aspeaking_to(self.user.pk):
                said = exc.text
            await self._send_error(
                session_id if isinstance(session_id, str) else None, exc.code, said
            )

    async def _start(
        self,
        session_id: Any,
        text: Any,
        *,
        regenerate: bool,
        temporary: bool = False,
        model: Any = None,
        message_id: Any = None,
    ) -> None:
        if session_id is not None and not isinstance(session_id, str):
            raise ServiceError("bad_request", _('"session" must be a conversation id or null.'))
        if model is not None and not isinstance(model, str):
            raise ServiceError("bad_request", _('"model" must be a model id from /api/models/.'))

        async def waiting() -> None:
            text = _("Compressing earlier messages… your message follows in a moment.")
            await self.send_json(
                {
                    "type": "notice",
                    "session": session_id,
                    "kind": "compressed",
                    "text": await asaid_to(self.user.pk, text),
                }
            )

        start = await runner.begin_turn(
            user=self.user,
            session_id=session_id,
            text=text,
            regenerate=regenerate,
            temporary=temporary,
            model=model or None,
            message_id=message_id,
            on_wait=waiting,
        )
        # Join before the turn publishes anything, so this tab sees every event.
        await self._join(session_group(start.session.pk))
        runner.launch_turn(start, user=self.user)

    async def _send(self, content: dict[str, Any]) -> None:
        await self._start(
            content.get("session"),
            content.get("text"),
            regenerate=False,
            temporary=content.get("temporary") is True,
            model=content.get("model"),
        )

    async def _regenerate(self, content: dict[str, Any]) -> None:
        await self._join(session_group(await self._owned(content.get("session"))))
        await self._start(
            content.get("session"), None, regenerate=True, message_id=content.get("message_id")
        )

    async def _edit(self, content: dict[str, Any]) -> None:
        if content.get("message_id") is None:
            raise ServiceError("bad_request", _('"message_id" names the message to edit.'))
        # Join first: the path change is announced as the turn begins.
        await self._join(session_group(await self._owned(content.get("session"))))
        await self._start(
            content.get("session"),
            content.get("text"),
            regenerate=False,
            message_id=content.get("message_id"),
        )

    async def _branch(self, content: dict[str, Any]) -> None:
        """Select an alternative; every tab of the conversation (this one too) hears
        `branch.changed` and redraws from there."""
        session_id = await self._owned(content.get("session"))
        await self._join(session_group(session_id))
        await database_sync_to_async(services.branch_select)(
            user=self.user, session_id=session_id, message_id=content.get("message_id")
        )

    async def _owned(self, session_id: Any) -> str:
        session = await database_sync_to_async(services.access_session)(
            user=self.user, session_id=session_id
        )
        return session.pk

    async def _stop(self, content: dict[str, Any]) -> None:
        await runner.request_stop(await self._owned(content.get("session")))

    async def _subscribe(self, content: dict[str, Any]) -> None:
        session_id = await self._owned(content.get("session"))
        await self._join(session_group(session_id))
        # A running turn answers with a snapshot of the answer so far (any process); with
        # none running the tab learns it is idle (a lost `assistant.done` ends here).
        holder = await database_sync_to_async(turn_claim.holder_kind)(session_id=session_id)
        if holder == turn_claim.TURN:
            await runner.request_sync(session_id, self.channel_name)
        else:
            await database_sync_to_async(turn_claim.answers_close_abandoned)(session_id=session_id)
            await self.send_json(
                {
                    "type": "session.idle",
                    "session": session_id,
                    "compressing": holder == turn_claim.COMPRESS,
                }
            )

    async def _error(self, session_id: str | None, code: str, message: Text) -> None:
        await self._send_error(session_id, code, await asaid_to(self.user.pk, message))

    async def _send_error(self, session_id: str | None, code: str, message: str) -> None:
        await self.send_json(
            {"type": "error", "session": session_id, "code": code, "message": message}
        )

    # --- events from the channel layer ---------------------------------------------------
    async def client_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])

    async def auth_revoked(self, message: dict[str, Any]) -> None:
        """Logout, password change or deactivation elsewhere ends this socket too."""
        await self.close(code=4401)
