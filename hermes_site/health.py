"""`GET /healthz`: is each component this process depends on reachable?"""

from __future__ import annotations

import time
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .celery import app as celery_app

CHECK_TIMEOUT = 3.0


def check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return connection.vendor


def check_channel_layer() -> str:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("CHANNEL_LAYERS is not configured")

    async def roundtrip() -> None:
        # The default prefix: channels_redis pops all of a process's channels from one
        # Redis list under one lock, and a waiter on its own prefix ("healthz.") never
        # got the lock while an open websocket held it: /healthz hung.
        # Through a group: the local-first layer hands a message for this process's own
        # channel over without Redis, but reads every group's members from it.
        channel = await layer.new_channel()
        token = uuid.uuid4().hex
        group = f"healthz.{token}"
        await layer.group_add(group, channel)
        try:
            await layer.group_send(group, {"type": "healthz", "token": token})
            message = await layer.receive(channel)
        finally:
            await layer.group_discard(group, channel)
        if message.get("token") != token:
            raise RuntimeError("channel layer returned a different message")

    async_to_sync(roundtrip)()
    return type(layer).__name__


def check_broker() -> str:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return "eager (tasks run inline; no broker)"
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=CHECK_TIMEOUT)
    return conn.transport_cls if isinstance(conn.transport_cls, str) else "redis"


CHECKS = {
    "database": check_database,
    "channel_layer": check_channel_layer,
    "broker": check_broker,
}


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    components: dict[str, dict[str, object]] = {}
    healthy = True
    for name, check in CHECKS.items():
        started = time.monotonic()
        try:
            detail = check()
        except Exception as exc:  # noqa: BLE001 — any failure means "down", reported as such
            healthy = False
            components[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        else:
            components[name] = {"ok": True, "detail": detail}
        components[name]["ms"] = round((time.monotonic() - started) * 1000, 1)
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", "components": components},
        status=200 if healthy else 503,
    )
