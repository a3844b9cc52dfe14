"""The Account page's import of a ChatGPT or Claude export as a background job: the upload
is saved under HERMES_EXPORT_DIR with the owner's prefix (so an erasure removes it with the
person's archives, see jobs.export_files_of_delete), a Celery task imports it holding the
job's lease (kind `chat_import`) and reports progress, and the summary stays on the job.
The file is deleted once the import has ended, whatever the outcome. When the person chose
to let Hermes learn from the history, the import's end queues the learning review
(privacy.chat_learning) on the same job."""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from collections.abc import Collection
from typing import IO, Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.exceptions import NotFound, ServiceError, lazy_format, stored
from core.leases import Lease, lease_acquire, lease_heartbeat, raise_if_held
from core.queue import task_send_on_commit

from .chat_import import chat_import
from .chat_learning import learn_plan, learn_queue, learn_unavailable
from .hermes_import import upload_save
from .import_report import HermesImportReport
from .jobs import PROGRESS_INTERVAL, Cancelled, export_dir, jobs_fail_stalled
from .models import ChatImportJob

logger = logging.getLogger(__name__)

KIND = "chat_import"


def _path_of(job: ChatImportJob):
    return export_dir() / job.file_name if job.file_name else None


def chat_import_job_start(
    *, user: AbstractBaseUser, upload: IO[bytes], learn: bool = False
) -> ChatImportJob:
    """Save `upload` and queue its import (then, with `learn`, the learning review).
    Refused (409) while another import of the person's, or its learning, is waiting or
    running; (413) past HERMES_IMPORT_MAX_MB; (400) `learn` when it cannot be used now."""
    jobs_fail_stalled(
        ChatImportJob.objects.filter(owner=user),
        error=stored(
            gettext_lazy(
                "The import stopped unexpectedly. Upload the file again: nothing is imported twice."
            )
        ),
    )
    active = Q(status__in=["queued", "running"]) | Q(learn_status__in=["queued", "running"])
    if ChatImportJob.objects.filter(active, owner=user).exists():
        raise ServiceError(
            "busy",
            gettext_lazy(
                "An import (or the learning from one) is already in progress; wait for it to "
                "finish."
            ),
            status=409,
        )
    if learn and (reason := learn_unavailable(user=user)):
        raise ServiceError("learn_unavailable", reason, status=400)
    target = export_dir() / f"u{user.pk}-{secrets.token_hex(16)}.chatimport"
    upload_save(upload, target, command="import_chats")
    with transaction.atomic():
        job = ChatImportJob.objects.create(
            owner=user, file_name=target.name, task_id=uuid.uuid4().hex, learn=learn
        )
        job_id = job.pk

        def unqueued() -> None:
            target.unlink(missing_ok=True)
            ChatImportJob.objects.filter(pk=job_id, status="queued").update(
                status="failed",
                error=stored(
                    gettext_lazy("The import could not be queued. Try again in a minute.")
                ),
                finished_at=timezone.now(),
            )

        task_send_on_commit(
            "privacy.chat_import_run", job_id, task_id=job.task_id, on_failure=unqueued
        )
    return job


def chat_import_job_learn_after(
    *, user: AbstractBaseUser, report: HermesImportReport
) -> ChatImportJob:
    """For an import made outside a job (`manage.py import_chats --learn`): a finished job
    with its summary, whose learning is queued on the worker (the Account page shows both)."""
    with transaction.atomic():
        job = ChatImportJob.objects.create(
            owner=user,
            status=ChatImportJob.Status.DONE,
            progress=100,
            stage="Done",
            report=report.stored(),
            source=report.chat_source,
            finished_at=timezone.now(),
            learn=True,
            learn_status=ChatImportJob.LearnStatus.QUEUED,
            learning=learn_plan(user=user, session_ids=report.session_ids),
        )
        job_id = job.pk
        transaction.on_commit(lambda: learn_queue(job_id=job_id))
    return job


def chat_import_jobs(
    *, user: AbstractBaseUser, limit: int = 3, also: Collection[int] = ()
) -> list[ChatImportJob]:
    """The user's `limit` latest imports, and the older ones among `also` (those whose
    learned notes are still in memory, so the Memory page's link to them lands), newest
    first."""
    jobs = list(ChatImportJob.objects.filter(owner=user)[:limit])
    older = set(also) - {job.pk for job in jobs}
    if older:
        jobs += ChatImportJob.objects.filter(owner=user, pk__in=older)
    return sorted(jobs, key=lambda job: (job.created_at, job.pk), reverse=True)


def access_chat_import_job(*, user: AbstractBaseUser, job_id: int) -> ChatImportJob:
    """The user's job; another user's id is indistinguishable from a missing one."""
    job = ChatImportJob.objects.filter(pk=job_id, owner=user).first()
    if job is None:
        raise NotFound(gettext_lazy("import"))
    return job


def chat_import_job_run(*, job_id: int) -> str:
    """Import the file of job `job_id`; returns the job's final status. Only the lease
    holder imports; a redelivery takes over a dead one's lease (the import skips what the
    dead one stored)."""
    lease = lease_acquire(
        ChatImportJob,
        job_id,
        kind=KIND,
        when=Q(status__in=["queued", "running"]),
        values={"status": "running", "progress": 0, "stage": "Checking the file"},
    )
    if lease is None:
        raise_if_held(ChatImportJob, job_id, working=Q(status="running"))
        status = ChatImportJob.objects.filter(pk=job_id).values_list("status", flat=True).first()
        return status or "gone"
    with lease_heartbeat(lease):
        return _run_holding(lease)


def _run_holding(lease: Lease) -> str:
    # What the import reports (its lines, its error) is kept marked for translation
    # (core.exceptions.stored): the Account page shows it in whichever language its reader
    # has when they look.
    job = ChatImportJob.objects.select_related("owner").get(pk=lease.pk)
    path = _path_of(job)
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < PROGRESS_INTERVAL and done < total:
            return
        last[0] = now
        if not lease.update(
            progress=min(100, done * 100 // max(total, 1)),
            stage=f"Conversations {done:,}/{total:,}",
        ):
            raise Cancelled

    try:
        if path is None or not path.is_file():
            raise ServiceError(
                "not_found", gettext_lazy("The uploaded file is gone; upload it again.")
            )
        report = chat_import(user=job.owner, path=path, progress=progress)
    except Cancelled:
        return "cancelled"
    except ServiceError as exc:
        lease.release(status="failed", error=exc.stored(), finished_at=timezone.now())
        return "failed"
    except Exception as exc:
        logger.exception("chat import %s failed", job.pk)
        lease.release(
            status="failed",
            error=stored(
                lazy_format(
                    gettext_lazy(
                        "The import stopped (%(error)s); upload the file again: what was "
                        "imported stays, nothing is imported twice."
                    ),
                    error=type(exc).__name__,
                )
            ),
            finished_at=timezone.now(),
        )
        return "failed"
    finally:
        if path is not None:
            path.unlink(missing_ok=True)
    learning: dict[str, Any] = {}
    if job.learn:
        learning = {
            "learn_status": ChatImportJob.LearnStatus.QUEUED,
            "learning": learn_plan(user=job.owner, session_ids=report.session_ids),
        }
    released = lease.release(
        status="done",
        progress=100,
        stage="Done",
        report=report.stored(),
        source=report.chat_source,
        finished_at=timezone.now(),
        **learning,
    )
    if released and learning:
        learn_queue(job_id=job.pk)
    return "done"
