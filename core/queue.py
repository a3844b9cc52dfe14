"""Start background work by task name.

A service that queues a Celery task looks the task up here instead of importing its app's
`tasks` module: task modules import services, so services importing tasks would make a
cycle. The name is the task's contract anyway (queued messages carry it), so it is what
both sides share.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery import current_app
from celery.result import AsyncResult
from django.db import transaction
from django.utils.translation import gettext_lazy
from kombu.exceptions import OperationalError

from .exceptions import ServiceError

logger = logging.getLogger(__name__)

# Celery marks the default modules imported before it has imported them: a second thread
# asking meanwhile would find the task missing (NotRegistered). One import at a time.
_import_lock = threading.Lock()


def task_send(name: str, *args: Any, **options: Any) -> AsyncResult:
    """Queue registered task `name` with `args` (`options` as for `apply_async`). Eager mode
    (tests, a bare runserver) runs it inline, as `.delay()` would. Call from
    `transaction.on_commit` when the task reads rows the caller is writing."""
    if name not in current_app.tasks:
        # A worker imports every app's tasks module at boot; a web process on first use.
        with _import_lock:
            current_app.loader.import_default_modules()
    return current_app.tasks[name].apply_async(args, **options)


def task_send_on_commit(
    name: str, *args: Any, on_failure: Callable[[], Any], **options: Any
) -> None:
    """Queue task `name` once the current transaction commits. When the broker cannot take
    it (down, unreachable), `on_failure` undoes what was committed for it (a job row must
    not wait forever for a task that was never queued) and the caller gets a 503
    ServiceError `queue_unavailable`."""

    def send() -> None:
        try:
            task_send(name, *args, **options)
        except (OperationalError, OSError) as exc:
            logger.error("could not queue %s: %s", name, exc, extra={"task_name": name})
            on_failure()
            raise ServiceError(
                "queue_unavailable",
                gettext_lazy(
                    "The background queue is unreachable right now, so this could not be "
                    "started. Try again in a minute."
                ),
                status=503,
            ) from exc

    transaction.on_commit(send)
