"""The chat websocket. It authenticates, checks ownership and routes; nothing more."""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from hermes_site.realtime import user_group


class ChatConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            await self.close(code=4401)
            return
        self.user = user
        self.groups_joined: set[str] = set()
        await self._join(user_group(user.pk))
        await self.accept()

    async def _join(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)
        self.groups_joined.add(group)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            await self.send_json(
                {
                    "type": "error",
                    "session": None,
                    "code": "bad_request",
                    "message": 'Messages are JSON objects with a "type".',
                }
            )
            return
        await self.send_json(
            {
                "type": "error",
                "session": content.get("session"),
                "code": "bad_request",
                "message": f"Unknown message type {content['type']!r}.",
            }
        )

    async def client_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])
