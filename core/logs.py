"""Structured logs: one JSON object per line on stdout, each carrying the id of the request
(or websocket, or Celery task) it belongs to, so one person's trouble can be followed
through nginx, the ASGI processes and the workers.

The id comes from the proxy's `X-Request-ID` (nginx's `$request_id`) when it looks like
one, else it is made here; it is sent back in the response's `X-Request-ID` header.
Never log message text, memory or search terms here: paths, status codes, ids and timings
only.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse

from .proxy import client_ip, is_trusted

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")

_ACCEPTABLE_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")
access_logger = logging.getLogger("hermes.access")

# Attributes every LogRecord has; anything else was passed with `extra=` and is emitted.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "request_id",
    "task_id",
}


def new_request_id(offered: str | None = None) -> str:
    if offered and _ACCEPTABLE_ID.match(offered):
        return offered
    return uuid.uuid4().hex


def _celery_task_id() -> str:
    try:
        from celery import current_task
    except ImportError:  # pragma: no cover - celery is a requirement
        return ""
    task = current_task
    request = getattr(task, "request", None) if task else None
    return getattr(request, "id", None) or ""


class ContextFilter(logging.Filter):
    """Adds `request_id` (and `task_id` inside a Celery task) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = request_id_var.get()
        if not getattr(record, "task_id", ""):
            record.task_id = _celery_task_id()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process or os.getpid(),
        }
        for key in ("request_id", "task_id"):
            value = getattr(record, key, "")
            if value:
                payload[key] = value
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            payload["stack"] = self.formatStack(record.stack_info)
        return json.dumps(payload, default=str, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """For a terminal (`make run`): the same fields, readable."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if not getattr(record, "request_id", ""):
            record.request_id = getattr(record, "task_id", "") or "-"
        return super().format(record)


class RequestIdMiddleware:
    """Gives each request an id (logs and the `X-Request-ID` response header) and writes one
    access-log line per request with the real client address."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        offered = None
        # Only the proxy may name the request; a client's header would forge log lines.
        if is_trusted(request.META.get("REMOTE_ADDR", "")):
            offered = request.META.get("HTTP_X_REQUEST_ID")
        request_id = new_request_id(offered)
        request.request_id = request_id
        token = request_id_var.set(request_id)
        started = time.monotonic()
        try:
            response = self.get_response(request)
            response["X-Request-ID"] = request_id
            user = getattr(request, "user", None)
            access_logger.info(
                "%s %s %s",
                request.method,
                request.path,
                response.status_code,
                extra={
                    "method": request.method,
                    "path": request.path,
                    "status": response.status_code,
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                    "client_ip": client_ip(request),
                    "user_id": user.pk if user is not None and user.is_authenticated else None,
                },
            )
            return response
        finally:
            request_id_var.reset(token)


class WebsocketLogMiddleware:
    """ASGI middleware: a request id for each websocket (its consumer and the turns it
    starts log with it) and one line when it opens, is refused and closes."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        client = (scope.get("client") or ("", 0))[0]
        offered = headers.get(b"x-request-id", b"").decode("latin-1") if is_trusted(client) else ""
        request_id = new_request_id(offered)
        token = request_id_var.set(request_id)
        started = time.monotonic()
        state = {"accepted": False, "logged_end": False}
        fields = {"path": scope.get("path", ""), "client_ip": client}

        async def logging_send(message: dict[str, Any]) -> None:
            kind = message.get("type")
            if kind == "websocket.accept" and not state["accepted"]:
                state["accepted"] = True
                access_logger.info("websocket open %s", fields["path"], extra=fields)
            elif kind == "websocket.close" and not state["logged_end"]:
                state["logged_end"] = True
                code = message.get("code", 1000)
                if state["accepted"]:
                    access_logger.info(
                        "websocket closed by the server %s",
                        fields["path"],
                        extra={**fields, "code": code, "duration_ms": _ms(started)},
                    )
                else:
                    access_logger.info(
                        "websocket refused %s", fields["path"], extra={**fields, "code": code}
                    )
            await send(message)

        try:
            await self.app(scope, receive, logging_send)
        finally:
            if state["accepted"] and not state["logged_end"]:
                access_logger.info(
                    "websocket closed %s",
                    fields["path"],
                    extra={**fields, "duration_ms": _ms(started)},
                )
            request_id_var.reset(token)


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
