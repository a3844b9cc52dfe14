"""Site-wide Celery tasks: notices to open tabs and the periodic housekeeping that Celery
beat sends (CELERY_BEAT_SCHEDULE in settings). All take ids or nothing, are idempotent and
have time limits.

A worker with the scheduler embedded (`-B`, as `make run` starts it) also sends the
housekeeping once when it is ready: a machine that runs the site an hour at a time would
otherwise never reach an hourly task, and leftovers of a crash are swept at once."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from . import backups, maintenance
from .leases import leases_requeue_stalled
from .realtime import notice_to_user

logger = logging.getLogger(__name__)


@shared_task(name="hermes_site.deliver_notice", time_limit=30)
def deliver_notice(user_id: int, kind: str, text: str, session_id: str | None = None) -> None:
    """Show a notice in every open tab of the user (used by background work)."""
    notice_to_user(user_id=user_id, kind=kind, text=text, session_id=session_id)


@shared_task(name="hermes_site.expire", soft_time_limit=240, time_limit=300)
def expire() -> dict[str, int]:
    """Things past their lifetime: login sessions and login-throttle records."""
    result = maintenance.housekeeping_run("expire")
    logger.info("expired %s", result, extra={"expired": result})
    return result


@shared_task(name="hermes_site.prune", soft_time_limit=540, time_limit=600)
def prune() -> dict[str, int]:
    """Leftovers: answers orphaned mid-stream by a dead process, old memory audit events."""
    result = maintenance.housekeeping_run("prune")
    logger.info("pruned %s", result, extra={"pruned": result})
    return result


@shared_task(name="hermes_site.requeue", soft_time_limit=50, time_limit=60)
def requeue() -> dict[str, int]:
    """Background work whose task the broker lost is sent again (core.leases)."""
    return leases_requeue_stalled()


@shared_task(name="hermes_site.optimize_database", soft_time_limit=1700, time_limit=1800)
def optimize_database() -> list[str]:
    """SQLite: FTS5 optimize, PRAGMA optimize, WAL checkpoint. PostgreSQL: VACUUM (ANALYZE)."""
    done = maintenance.database_optimize()
    logger.info("database optimized", extra={"steps": done})
    return done


@shared_task(name="hermes_site.backup", soft_time_limit=2700, time_limit=3000)
def backup() -> str:
    """A scheduled backup into HERMES_BACKUP_DIR, keeping the newest HERMES_BACKUP_KEEP."""
    path = backups.backup_scheduled()
    logger.info("backup written to %s", path, extra={"backup": str(path)})
    return str(path)


#: Not sent at start: slow on a big database, and they leave nothing behind to sweep.
NOT_AT_START = {"hermes_site.optimize_database", "hermes_site.backup"}


@worker_ready.connect
def housekeeping_at_start(sender: object, **_: object) -> None:
    """Send the scheduled housekeeping once, if this worker embeds the scheduler."""
    if getattr(getattr(sender, "controller", None), "beat", None) is None:
        return
    names = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()} - NOT_AT_START
    for name in sorted(names):
        sender.app.send_task(name)
    logger.info("housekeeping sent at start: %s", ", ".join(sorted(names)))
