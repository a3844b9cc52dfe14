"""Start background work by task name.

A service that queues a Celery task looks the task up here instead of importing its app's
`tasks` module: task modules import services, so services importing tasks would make a
cycle. The name is the task's contract anyway (queued messages carry it), so it is what
both sides share.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from celery.result import AsyncResult


def task_send(name: str, *args: Any, **options: Any) -> AsyncResult:
    """Queue registered task `name` with `args` (`options` as for `apply_async`). Eager mode
    (tests, a bare runserver) runs it inline, as `.delay()` would. Call from
    `transaction.on_commit` when the task reads rows the caller is writing."""
    if name not in current_app.tasks:
        # A worker imports every app's tasks module at boot; a web process on first use.
        current_app.loader.import_default_modules()
    return current_app.tasks[name].apply_async(args, **options)
