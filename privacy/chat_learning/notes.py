"""The notes an import's learning wrote, as the Memory page, the audit log and the Account
page show them: memory rows of source "import_review" whose `source_client` is the import's
id. The lookup below names them for memory.provenance (registered from the app's ready())."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext

from memory.models import Source
from memory.provenance import Writer
from memory.selectors import WriterCount, memory_writers
from memory.services import Provenance, Removed, memory_entries_remove_by_writer
from sessions_app.models import IMPORT_SOURCES

from ..chat_jobs import access_chat_import_job
from ..models import ChatImportJob


def panel_url(job_id: int) -> str:
    """The import's panel on the Account page."""
    return reverse("account") + f"#chat-import-{job_id}"


def import_phrase(job: ChatImportJob) -> str:
    """ "your ChatGPT import of 2024-05-01" (the format is unknown until it is imported)."""
    name = IMPORT_SOURCES.get(job.source)
    when = f"{timezone.localtime(job.created_at):%Y-%m-%d}"
    if name:
        return gettext("your %(name)s import of %(when)s") % {"name": name, "when": when}
    return gettext("your import of %(when)s") % {"when": when}


def learned_label(job: ChatImportJob) -> str:
    return gettext("Learned from %(phrase)s") % {"phrase": import_phrase(job)}


def learned_writers(user: AbstractBaseUser, clients: set[str]) -> dict[str, Writer]:
    """The writers of source "import_review" among `clients`: `user`'s imports only."""
    ids = [int(c) for c in clients if c.isascii() and c.isdigit()]
    jobs = ChatImportJob.objects.filter(owner=user, pk__in=ids).only("pk", "source", "created_at")
    return {
        str(job.pk): Writer(label=learned_label(job), url=panel_url(job.pk), import_id=job.pk)
        for job in jobs
    }


def chat_import_notes_remove(*, user: AbstractBaseUser, job_id: int, source: str) -> Removed:
    """Remove every note the learning of `user`'s import `job_id` wrote, as the person
    acting through `source` (the Account page, the API); NotFound for another's import."""
    job = access_chat_import_job(user=user, job_id=job_id)
    return memory_entries_remove_by_writer(
        user=user,
        source=Source.IMPORT_REVIEW,
        client=str(job.pk),
        provenance=Provenance(source=source, actor=user),
    )


def learned_counts(*, user: AbstractBaseUser) -> dict[int, WriterCount]:
    """Import id → how many of the notes its learning wrote are still in `user`'s memory
    (active, and waiting for approval)."""
    return {
        int(row.source_client): row
        for row in memory_writers(user=user)
        if row.source == Source.IMPORT_REVIEW and row.source_client.isdigit()
    }
