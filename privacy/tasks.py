"""Celery tasks of the privacy app: data exports and the follow-up of an account erasure.
They keep the `accounts.` names they had before the app existed, so queued tasks still run.
They take ids, re-fetch, and are safe to run twice."""

from __future__ import annotations

from celery import Task, shared_task
from django.conf import settings

from core.leases import run_leased

from .chat_jobs import chat_import_job_run
from .chat_learning import LEARN_TASK, LEARN_TASK_LIMIT
from .chat_learning import chat_learn_run as learning_run
from .erase import erasure_scrub
from .jobs import export_job_run
from .jobs import exports_expire as expire


@shared_task(
    name="accounts.export_build",
    bind=True,
    soft_time_limit=settings.HERMES_EXPORT_TASK_LIMIT,
    time_limit=settings.HERMES_EXPORT_TASK_LIMIT + 30,
    acks_late=True,
)
def export_build(self: Task, job_id: int, origin: str = "") -> dict[str, object]:
    """Build the archive of ExportJob `job_id`. The result holds no personal data (it is
    kept in the result backend): only the job id and its final status. A redelivery takes
    over the lease of a build whose process died. `origin` is where the "export ready" mail
    links to (empty: HERMES_PUBLIC_URL)."""
    status = run_leased(self, lambda: export_job_run(job_id=job_id, origin=origin))
    return {"job": job_id, "status": status}


@shared_task(name="accounts.exports_expire", time_limit=300)
def exports_expire() -> int:
    """Delete export archives past HERMES_EXPORT_EXPIRY_HOURS (periodic)."""
    return expire()


@shared_task(name="accounts.erasure_followup", time_limit=1800, soft_time_limit=1700)
def erasure_followup(user_id: int, groups: list[str]) -> list[str]:
    """After an account erasure: drop the person's channel groups and queued socket
    messages, then compact storage (SQLite: FTS optimize + WAL checkpoint; PostgreSQL:
    VACUUM) so deleted rows are not recoverable. Idempotent."""
    return erasure_scrub(user_id=user_id, groups=groups)


@shared_task(
    name="privacy.chat_import_run",
    bind=True,
    soft_time_limit=settings.HERMES_EXPORT_TASK_LIMIT,
    time_limit=settings.HERMES_EXPORT_TASK_LIMIT + 30,
    acks_late=True,
)
def chat_import_run(self: Task, job_id: int) -> dict[str, object]:
    """Import the ChatGPT/Claude export uploaded for ChatImportJob `job_id` (its time limit
    is the export's). Only the job id and its status go to the result backend."""
    return {
        "job": job_id,
        "status": run_leased(self, lambda: chat_import_job_run(job_id=job_id)),
    }


@shared_task(
    name=LEARN_TASK,
    bind=True,
    soft_time_limit=LEARN_TASK_LIMIT,
    time_limit=LEARN_TASK_LIMIT + 30,
    acks_late=True,
)
def chat_learn_run(self: Task, job_id: int) -> dict[str, object]:
    """Learn from the conversations ChatImportJob `job_id` imported (the person's choice at
    upload). A run works for a slice of time and queues its continuation; a redelivery
    takes over a dead run's lease and goes on from its last finished batch."""
    return {
        "job": job_id,
        "status": run_leased(self, lambda: learning_run(job_id=job_id)),
    }
