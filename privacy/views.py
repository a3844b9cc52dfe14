"""The privacy actions of the Account page: download my data, import a Hermes home, forget
all memory, delete my account. Thin: each checks who is asking and calls a service; a
refusal is flashed back on the Account page's section (`errors_back_to`). Every message is
tagged with the section the redirect jumps to, and the page shows it there (core.flash)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from accounts.mail import site_origin
from core.flash import section_tag
from core.middleware import errors_back_to
from memory.models import MemoryEntry, Source
from memory.selectors import memory_settings
from memory.services import Provenance, memory_import_held, memory_import_resolve

from . import chat_jobs, erase, jobs
from .chat_learning import inferences_on, learn_unavailable, notes
from .hermes_import import hermes_import_zip

#: Report lines shown after an import (the rest are summarised).
MAX_REPORT_LINES = 12


def chat_import_jobs_shown(user: AbstractBaseUser) -> list[Any]:
    """The imports the Account page lists, each with `learned` (its notes still in memory,
    or None) and `phrase` ("your ChatGPT import of 2024-05-01")."""
    learned = notes.learned_counts(user=user)
    jobs = chat_jobs.chat_import_jobs(user=user, also=learned)
    for job in jobs:
        job.learned = learned.get(job.pk)
        job.phrase = notes.import_phrase(job)
    return jobs


def account_privacy_context(user: AbstractBaseUser) -> dict[str, Any]:
    """What the Account page's data section shows (registered with accounts.account_page)."""
    return {
        "held_imports": memory_import_held(user=user),
        "export_jobs": jobs.export_jobs(user=user, limit=3),
        "export_expiry_hours": settings.HERMES_EXPORT_EXPIRY_HOURS,
        "temporary_chat_days": settings.HERMES_TEMPORARY_CHAT_DAYS,
        "memory_entry_count": MemoryEntry.objects.filter(owner=user).count(),
        "import_max_mb": settings.HERMES_IMPORT_MAX_MB,
        "chat_import_jobs": chat_import_jobs_shown(user),
        "chat_learn": {
            "unavailable": learn_unavailable(user=user),
            "conversations": settings.HERMES_IMPORT_LEARN_CONVERSATIONS,
            "calls": settings.HERMES_IMPORT_LEARN_MAX_CALLS,
            "approval": memory_settings(user=user)[1],
            "infers": inferences_on(user=user),
        },
    }


def _tell(request: HttpRequest, level: int, text: str, *, section: str) -> None:
    messages.add_message(request, level, text, extra_tags=section_tag(section))


def _back(anchor: str) -> HttpResponse:
    return redirect(reverse("account") + f"#{anchor}")


@login_required
@require_POST
def export_start(request: HttpRequest) -> HttpResponse:
    job = jobs.export_job_start(user=request.user, origin=site_origin(request))
    if job.status == "done":
        _tell(request, messages.SUCCESS, _("Your archive is ready to download."), section="data")
    else:
        _tell(
            request,
            messages.SUCCESS,
            _("Building your archive. This page shows its progress; download it when it is ready."),
            section="data",
        )
    return _back("data")


@login_required
@require_GET
@errors_back_to("account", anchor="data")
def export_download(request: HttpRequest, job_id: int) -> HttpResponse:
    return jobs.export_job_open(user=request.user, job_id=job_id).response()


@login_required
@require_POST
@errors_back_to("account", anchor="import")
def hermes_import_upload(request: HttpRequest) -> HttpResponse:
    upload = request.FILES.get("home")
    if upload is None:
        _tell(
            request,
            messages.ERROR,
            _("Choose a zip of your Hermes home (or of a Hermes Web export)."),
            section="import",
        )
        return _back("import")
    report = hermes_import_zip(user=request.user, upload=upload)
    lines = report.said()
    shown, rest = lines[:MAX_REPORT_LINES], len(lines) - MAX_REPORT_LINES
    level = messages.SUCCESS if report.ok else messages.WARNING
    _tell(
        request,
        level,
        _("Import finished.") if report.ok else _("Import finished with problems."),
        section="import",
    )
    for line, problem in shown:
        _tell(request, messages.ERROR if problem else messages.INFO, str(line), section="import")
    if rest > 0:
        _tell(
            request,
            messages.INFO,
            _("… and %(rest)s more line(s); `manage.py import_hermes` prints all.")
            % {"rest": rest},
            section="import",
        )
    return _back("import")


@login_required
@require_POST
@errors_back_to("account", anchor="import-chats")
def chat_import_upload(request: HttpRequest) -> HttpResponse:
    upload = request.FILES.get("export")
    if upload is None:
        _tell(
            request,
            messages.ERROR,
            _("Choose a ChatGPT or Claude export (the zip, or its conversations.json)."),
            section="import-chats",
        )
        return _back("import-chats")
    learn = request.POST.get("learn") == "1"
    chat_jobs.chat_import_job_start(user=request.user, upload=upload, learn=learn)
    _tell(
        request,
        messages.SUCCESS,
        _(
            "Importing your conversations. This page shows the progress and, at the end, what "
            "was imported — then what Hermes learned from them."
        )
        if learn
        else _(
            "Importing your conversations. This page shows the progress and, at the end, what "
            "was imported."
        ),
        section="import-chats",
    )
    return _back("import-chats")


@login_required
@require_POST
@errors_back_to("account", anchor="import-chats")
def chat_import_notes_remove(request: HttpRequest, job_id: int) -> HttpResponse:
    """ "Remove the N notes learned from this import" on the import's panel."""
    removed = notes.chat_import_notes_remove(user=request.user, job_id=job_id, source=Source.MANUAL)
    _tell(request, messages.SUCCESS, removed.message(), section="import-chats")
    return _back(f"chat-import-{job_id}")


@login_required
@require_POST
@errors_back_to("account", anchor="import")
def hermes_import_held(request: HttpRequest) -> HttpResponse:
    """The person's choice for memory entries an import held back (over their limit)."""

    message = memory_import_resolve(
        user=request.user,
        target=request.POST.get("target"),
        choice=request.POST.get("choice"),
        provenance=Provenance(source=Source.IMPORT, actor=request.user),
    )
    _tell(request, messages.SUCCESS, message, section="import")
    return _back("import")


@login_required
@require_POST
def memory_forget(request: HttpRequest) -> HttpResponse:
    if request.POST.get("confirm") != "forget":
        _tell(
            request,
            messages.ERROR,
            _("Tick the box to confirm that all memory should be forgotten."),
            section="memory-forget",
        )
        return _back("memory-forget")
    report = erase.memory_forget_all(user=request.user)
    entries = report.rows.get("memory.MemoryEntry", 0)
    _tell(
        request,
        messages.SUCCESS,
        ngettext(
            "Forgot all memory: %(count)s entry and their history are gone. New conversations "
            "start without them.",
            "Forgot all memory: %(count)s entries and their history are gone. New conversations "
            "start without them.",
            entries,
        )
        % {"count": entries},
        section="memory-forget",
    )
    return _back("memory-forget")


@login_required
@require_POST
@errors_back_to("account", anchor="delete")
def account_delete(request: HttpRequest) -> HttpResponse:
    user = request.user
    username = user.get_username()
    erase.account_erase(
        user=user,
        password=request.POST.get("password", ""),
        confirm=request.POST.get("confirm", ""),
        request=request,
    )
    logout(request)
    return render(request, "accounts/deleted.html", {"username": username})
