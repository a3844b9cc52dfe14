"""Export jobs: "Download my data" built by a Celery task with progress, downloadable by
its owner only, deleted after HERMES_EXPORT_EXPIRY_HOURS.

The ExportJob row is the job (claimed with a conditional UPDATE, so a redelivered task
does nothing). Files live in HERMES_EXPORT_DIR under random names that start with the
owner's id (`u<id>-<hex>.zip`, built in `.build-u<id>-<hex>-*/`), so an erasure removes
every file of the person, crashed builds included; a job whose row disappears while it runs
(the account was erased) deletes its own file.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import FileResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy

from accounts.mail import mail_enabled, mail_send, site_origin
from core.exceptions import NotFound, ServiceError, Stored, lazy_format, stored
from core.leases import (
    Lease,
    lease_acquire,
    lease_heartbeat,
    raise_if_held,
)
from core.queue import task_send_on_commit

from .export import build_export
from .models import ExportJob

logger = logging.getLogger(__name__)

#: How often a running export writes its progress to the database (seconds).
PROGRESS_INTERVAL = 1.0


class Cancelled(Exception):
    """The job's row is gone (account erased) or no longer ours: stop and clean up."""


def export_dir() -> Path:
    path = Path(settings.HERMES_EXPORT_DIR)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _file_of(job: ExportJob) -> Path | None:
    if not job.file_name:
        return None
    # file_name is ours (random hex), never user input; refuse anything else anyway.
    if "/" in job.file_name or job.file_name.startswith("."):
        return None
    return export_dir() / job.file_name


def _owner_prefix(user_id: int) -> str:
    return f"u{user_id}-"


def export_path_new(*, user: AbstractBaseUser) -> Path:
    """A new archive path of `user` (its build directory is named after it, see
    build_export)."""
    return export_dir() / f"{_owner_prefix(user.pk)}{secrets.token_hex(16)}.zip"


def export_filename(user: AbstractBaseUser, when: datetime | None = None) -> str:
    """The name the browser saves the archive under."""
    stamp = timezone.localtime(when or timezone.now()).strftime("%Y%m%d-%H%M")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user.get_username())
    return f"hermes-export-{safe}-{stamp}.zip"


# --- starting -------------------------------------------------------------------------------


def export_job_start(*, user: AbstractBaseUser, origin: str = "") -> ExportJob:
    """Queue an export for `user`, or return the one already queued or being built (a
    second click must not build two archives). A build whose process died (its lease is no
    longer renewed) is marked failed first. `origin` (the site's, see accounts.mail) is where
    the "export ready" mail links to. Raises ServiceError 503 when the task cannot be
    queued; the job is then failed, not left queued."""
    queued_since = timezone.now() - timedelta(seconds=settings.HERMES_EXPORT_TASK_LIMIT + 60)
    with transaction.atomic():
        exports_fail_stalled(user=user)
        active = (
            ExportJob.objects.filter(owner=user)
            .filter(
                Q(status="queued", created_at__gt=queued_since)
                | Q(status="running", lease_expires_at__gt=timezone.now())
            )
            .first()
        )
        if active is not None:
            return active
        job = ExportJob.objects.create(owner=user, task_id=uuid.uuid4().hex)
        job_id = job.pk

        def unqueued() -> None:
            ExportJob.objects.filter(pk=job_id, status="queued").update(
                status="failed",
                error=stored(
                    gettext_lazy("The export could not be queued. Try again in a minute.")
                ),
                finished_at=timezone.now(),
            )

        task_send_on_commit(
            "accounts.export_build", job_id, origin, task_id=job.task_id, on_failure=unqueued
        )
    return job


def jobs_fail_stalled(jobs: QuerySet, *, error: Stored) -> int:
    """Jobs (exports, chat imports) whose lease expired — the process died and no
    redelivery took them over — end as failed with `error` (core.exceptions.stored), so they
    neither show "running" forever nor block a new one."""
    return (
        jobs.filter(status="running")
        .exclude(lease_expires_at__gt=timezone.now())
        .update(
            status="failed",
            lease_owner="",
            lease_expires_at=None,
            error=error,
            finished_at=timezone.now(),
        )
    )


def exports_fail_stalled(*, user: AbstractBaseUser | None = None) -> int:
    jobs = ExportJob.objects.all() if user is None else ExportJob.objects.filter(owner=user)
    return jobs_fail_stalled(
        jobs, error=stored(gettext_lazy("The export stopped unexpectedly. Start it again."))
    )


# --- running --------------------------------------------------------------------------------


def export_job_run(*, job_id: int, origin: str = "") -> str:
    """Build the archive of job `job_id`; returns the job's final status. Safe to run twice:
    only the lease holder builds; a dead build's lease is taken over and the build starts
    again; raises LeaseBusy while a live build holds it."""
    lease = lease_acquire(
        ExportJob,
        job_id,
        kind="export",
        when=Q(status__in=["queued", "running"]),
        values={
            "status": "running",
            "started_at": timezone.now(),
            "progress": 0,
            "stage": "Starting",
        },
    )
    if lease is None:
        raise_if_held(ExportJob, job_id, working=Q(status="running"))
        status = ExportJob.objects.filter(pk=job_id).values_list("status", flat=True).first()
        return status or "gone"
    with lease_heartbeat(lease):
        status = _build_holding(lease)
    if status == "done":
        _tell_ready(job_id=job_id, origin=origin)
    return status


def _build_holding(lease: Lease) -> str:
    job = ExportJob.objects.select_related("owner").get(pk=lease.pk)
    target = export_path_new(user=job.owner)
    last = [0.0]

    def progress(pct: int, stage: str) -> None:
        now = time.monotonic()
        if now - last[0] < PROGRESS_INTERVAL and pct < 100:
            return
        last[0] = now
        if not lease.update(progress=max(0, min(100, pct)), stage=stage[:200]):
            raise Cancelled

    try:
        stats = build_export(user=job.owner, target=target, progress=progress)
    except Cancelled:
        target.unlink(missing_ok=True)
        return "cancelled"
    except Exception as exc:
        target.unlink(missing_ok=True)
        logger.exception("export %s failed", job.pk)
        error = lazy_format(
            gettext_lazy("The archive could not be built (%(error)s). Try again."),
            error=type(exc).__name__,
        )
        lease.release(status="failed", error=stored(error), finished_at=timezone.now())
        return "failed"
    now = timezone.now()
    if not lease.release(
        status="done",
        progress=100,
        stage="Ready",
        file_name=target.name,
        size=stats.size,
        finished_at=now,
        expires_at=now + timedelta(hours=settings.HERMES_EXPORT_EXPIRY_HOURS),
    ):
        # Erased, or taken over, while we built it: the file must not outlive the row.
        target.unlink(missing_ok=True)
        return "cancelled"
    return "done"


def _tell_ready(*, job_id: int, origin: str) -> None:
    """Mail the owner that the archive is ready (when the site sends mail and they have an
    address). A failure to send is logged; the archive stays ready on the account page."""
    job = ExportJob.objects.select_related("owner").get(pk=job_id)
    if not (mail_enabled() and job.owner.email):
        return
    mail_send(
        to=job.owner.email,
        recipient=job.owner_id,
        template="export_ready",
        context={
            "username": job.owner.get_username(),
            "url": (site_origin(None) or origin) + reverse("account") + "#data",
            "expires_at": job.expires_at,
        },
    )


# --- reading --------------------------------------------------------------------------------


def export_jobs(*, user: AbstractBaseUser, limit: int = 5) -> list[ExportJob]:
    return list(ExportJob.objects.filter(owner=user).order_by("-created_at", "-id")[:limit])


def access_export_job(*, user: AbstractBaseUser, job_id: int) -> ExportJob:
    """The user's job; another user's id is indistinguishable from a missing one."""
    job = ExportJob.objects.filter(pk=job_id, owner=user).first()
    if job is None:
        raise NotFound(gettext_lazy("export"))
    return job


@dataclass(frozen=True)
class Download:
    handle: IO[bytes]
    filename: str
    size: int

    def response(self) -> FileResponse:
        """The archive as an attachment, never cached (the page and the API serve it alike)."""
        response = FileResponse(
            self.handle, as_attachment=True, filename=self.filename, content_type="application/zip"
        )
        response["Cache-Control"] = "no-store"
        return response


def export_job_open(*, user: AbstractBaseUser, job_id: int) -> Download:
    """Open the finished archive of one of the user's jobs for download."""
    job = access_export_job(user=user, job_id=job_id)
    if job.status == ExportJob.Status.EXPIRED or (
        job.expires_at is not None and job.expires_at <= timezone.now()
    ):
        raise ServiceError(
            "expired", gettext_lazy("This download has expired; start a new export."), status=410
        )
    if job.status != ExportJob.Status.DONE:
        raise ServiceError(
            "not_ready",
            gettext_lazy("The archive is not ready yet."),
            status=409,
            progress=job.progress,
        )
    path = _file_of(job)
    try:
        handle = path.open("rb") if path is not None else None
    except FileNotFoundError:
        handle = None
    if handle is None:
        raise ServiceError(
            "expired",
            gettext_lazy("This download is no longer available; start a new export."),
            status=410,
        )
    return Download(handle, export_filename(user, job.finished_at), job.size)


def export_open_now(*, user: AbstractBaseUser) -> Download:
    """Build the archive right away (small accounts, GET /api/me/export/) and return it
    open. The file is unlinked as soon as it is open, so nothing stays in var/ after the
    response is sent (or if the client goes away)."""
    target = export_path_new(user=user)
    try:
        stats = build_export(user=user, target=target)
        handle = target.open("rb")
    finally:
        target.unlink(missing_ok=True)
    return Download(handle, export_filename(user), stats.size)


# --- expiry and erasure ---------------------------------------------------------------------


def export_files_delete(*, jobs: list[ExportJob]) -> int:
    deleted = 0
    for job in jobs:
        path = _file_of(job)
        if path is not None and path.exists():
            path.unlink(missing_ok=True)
            deleted += 1
    return deleted


def _remove(path: Path) -> bool:
    try:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    return True


def export_files_of_delete(*, user_id: int) -> int:
    """Delete every archive and build directory of user `user_id`, finished or left by a
    crashed build (account erasure); returns how many were removed."""
    prefix = _owner_prefix(user_id)
    return sum(
        _remove(path)
        for path in export_dir().iterdir()
        if path.name.startswith((prefix, f".build-{prefix}"))
    )


def exports_expire(*, now: datetime | None = None) -> int:
    """Delete archives past their expiry (and leftovers of builds that died), and fail builds
    whose process died; returns how many files were removed. Idempotent."""
    now = now or timezone.now()
    exports_fail_stalled()
    expired = list(ExportJob.objects.filter(status="done", expires_at__lte=now))
    removed = export_files_delete(jobs=expired)
    ExportJob.objects.filter(pk__in=[j.pk for j in expired]).update(
        status="expired", file_name="", stage="Expired"
    )
    # Files no finished job points to, older than any build can take: a crashed build.
    directory = export_dir()
    keep = set(
        ExportJob.objects.filter(status="done")
        .exclude(file_name="")
        .values_list("file_name", flat=True)
    )
    cutoff = time.time() - settings.HERMES_EXPORT_TASK_LIMIT - 3600
    for path in directory.iterdir():
        if path.name in keep:
            continue
        try:
            if path.stat().st_mtime >= cutoff:
                continue
        except FileNotFoundError:
            continue
        removed += _remove(path)
    return removed
