"""The Memory page and its audit log. Thin: every change goes through memory.services.

A refused change re-renders the page with the text the person typed and the reason, so
nothing they wrote is lost (hence the local handlers around those services; an entry in
the URL that is missing or not theirs is ServiceErrorMiddleware's 404 page); a successful
one redirects (post/redirect/get).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from core.exceptions import NotFound, ServiceError
from core.middleware import errors_back_to

from . import page_text, selectors, services
from .apis import export_response, read_upload, writer_filter
from .forms import EntryForm, ImportForm
from .models import MemoryEntry, MemoryEvent, Source, Target
from .provenance import Writer, default_writer, writer_of, writers_attach

PAGE = services.Provenance(source=Source.MANUAL)
IMPORT = services.Provenance(source=Source.IMPORT)

BLURBS = {
    Target.MEMORY: gettext_lazy(
        "The agent's own notes: your environment, projects, conventions and "
        "lessons it should remember."
    ),
    Target.USER: gettext_lazy(
        "Who you are: your name, role, preferences and how you like to work."
    ),
}


def _target_or_404(target: str) -> str:
    if target not in Target.values:
        raise Http404
    return target


class Shown:
    """The Memory page's filter: everything, or the entries of one writer (a source, or
    one import's learning) — `?source=…`, `?source_import=<id>`."""

    def __init__(self, request: HttpRequest) -> None:
        try:
            self.source, self.client = writer_filter(request.GET)
        except ServiceError:
            self.source = self.client = None  # a malformed filter shows everything
        self.writer: Writer | None = None
        if self.source is not None:
            self.writer = writer_of(user=request.user, source=self.source, client=self.client or "")

    @property
    def active(self) -> bool:
        return self.source is not None

    @property
    def description(self) -> str:
        """What is shown: "learned from your ChatGPT import of …", "by “Chat”"."""
        if self.writer is None:
            return ""
        if self.client is not None:
            label = self.writer.label
            return label[:1].lower() + label[1:]
        return gettext("by “%(writer)s”") % {"writer": self.writer.label}

    def keeps(self, entry: MemoryEntry) -> bool:
        return (self.source is None or entry.source == self.source) and (
            self.client is None or entry.source_client == self.client
        )


def _writer_choices(request: HttpRequest, shown: Shown) -> list[dict[str, Any]]:
    """The filter's choices: each source with its entries, and each writer within it that
    has a page of its own (an import), most entries first."""
    counts = selectors.memory_writers(user=request.user)
    writers_attach(user=request.user, rows=counts)
    by_source: dict[str, dict[str, Any]] = {}
    for row in counts:
        choice = by_source.setdefault(
            row.source,
            {
                "label": default_writer(row.source, "").label,
                "query": urlencode({"source": row.source}),
                "count": 0,
                "current": shown.source == row.source and shown.client is None,
                "writers": [],
            },
        )
        choice["count"] += row.total
        if row.writer.import_id is not None:
            choice["writers"].append(
                {
                    "label": row.writer.label,
                    "query": urlencode({"source_import": row.writer.import_id}),
                    "count": row.total,
                    "current": shown.client == row.source_client,
                }
            )
    return sorted(by_source.values(), key=lambda c: -c["count"])


def _lists(
    request: HttpRequest, prefs: selectors.MemoryPrefs, shown: Shown
) -> list[dict[str, Any]]:
    entries = list(
        selectors.memory_entries(user=request.user)
        .select_related("source_session")
        .order_by("target", "order", "id")
    )
    writers_attach(user=request.user, rows=entries)
    result = []
    for target in Target:
        mine = [e for e in entries if e.target == target]
        usage = selectors.Usage(
            selectors.usage_of([e.content for e in mine]),
            prefs.limit(target),
            len(mine),
        )
        result.append(
            {
                "target": target.value,
                "title": target.label,
                "blurb": BLURBS[target],
                "add_label": gettext("Add to %(list)s") % {"list": str(target.label).lower()},
                "entries": [e for e in mine if shown.keeps(e)],
                "total": len(mine),
                "usage": usage,
                "high": int(usage.limit * 0.9),
                "form": EntryForm(auto_id=f"id_{target.value}_%s"),
                "error": None,
            }
        )
    return result


def _render_page(
    request: HttpRequest,
    *,
    status: int = 200,
    add: tuple[str, str, str] | None = None,
    edit: tuple[int, str, str] | None = None,
    import_form: ImportForm | None = None,
    import_error: str | None = None,
    pending_error: tuple[int, str] | None = None,
) -> HttpResponse:
    prefs = selectors.memory_prefs(user=request.user)
    shown = Shown(request)
    writers = _writer_choices(request, shown)
    lists = _lists(request, prefs, shown)
    for item in lists:
        if add is not None and item["target"] == add[0]:
            item["form"] = EntryForm(initial={"content": add[1]}, auto_id=f"id_{item['target']}_%s")
            item["error"] = add[2]
        if edit is not None:
            for entry in item["entries"]:
                if entry.pk == edit[0]:
                    entry.edit_text, entry.edit_error = edit[1], edit[2]
    pending = list(
        selectors.memory_entries(
            user=request.user,
            status=MemoryEntry.Status.PENDING,
            source=shown.source,
            client=shown.client,
        )
        .select_related("source_session", "pending_of")
        .order_by("created_at", "id")
    )
    writers_attach(user=request.user, rows=pending)
    if pending_error is not None:
        for entry in pending:
            if entry.pk == pending_error[0]:
                entry.error = pending_error[1]
    return render(
        request,
        "memory/memory.html",
        {
            "lists": lists,
            "pending": pending,
            "memory_enabled": prefs.enabled,
            "approval": prefs.approval,
            "import_form": import_form or ImportForm(),
            "import_error": import_error,
            "shown": shown,
            "shown_count": len(pending) + sum(len(item["entries"]) for item in lists),
            "writers": writers,
        },
        status=status,
    )


@login_required
@require_GET
def memory_page(request: HttpRequest) -> HttpResponse:
    return _render_page(request)


@login_required
@require_POST
def entry_add(request: HttpRequest, target: str) -> HttpResponse:
    target = _target_or_404(target)
    text = request.POST.get("content", "")
    try:
        result = services.memory_add(
            user=request.user, target=target, content=text, provenance=PAGE
        )
    except ServiceError as exc:
        return _render_page(
            request, status=400, add=(target, text, page_text.page_message(exc, target))
        )
    messages.success(request, page_text.result_message(target, result.message))
    return redirect(reverse("memory_page") + f"#list-{target}")


@login_required
@require_POST
def entry_edit(request: HttpRequest, entry_id: int) -> HttpResponse:
    entry = selectors.access_memory_entry(
        user=request.user, entry_id=entry_id, status=MemoryEntry.Status.ACTIVE
    )
    text = request.POST.get("content", "")
    try:
        result = services.memory_entry_update(
            user=request.user, entry_id=entry.pk, content=text, provenance=PAGE
        )
    except ServiceError as exc:
        return _render_page(
            request, status=400, edit=(entry.pk, text, page_text.page_message(exc, entry.target))
        )
    messages.success(request, page_text.result_message(entry.target, result.message))
    return redirect(reverse("memory_page") + f"#list-{entry.target}")


@login_required
@require_POST
@errors_back_to("memory_page")
def entry_delete(request: HttpRequest, entry_id: int) -> HttpResponse:
    entry = selectors.access_memory_entry(
        user=request.user, entry_id=entry_id, status=MemoryEntry.Status.ACTIVE
    )
    services.memory_entry_delete(user=request.user, entry_id=entry.pk, provenance=PAGE)
    messages.success(
        request, gettext("%(list)s: entry deleted.") % {"list": entry.get_target_display()}
    )
    return redirect(reverse("memory_page") + f"#list-{entry.target}")


@login_required
@require_POST
def pending_approve(request: HttpRequest, entry_id: int) -> HttpResponse:
    entry = selectors.access_memory_entry(
        user=request.user, entry_id=entry_id, status=MemoryEntry.Status.PENDING
    )
    try:
        result = services.memory_pending_approve(
            user=request.user, entry_id=entry.pk, provenance=PAGE
        )
    except NotFound:
        raise  # ServiceErrorMiddleware: the 404 page
    except ServiceError as exc:
        return _render_page(
            request,
            status=400,
            pending_error=(entry_id, page_text.page_message(exc, entry.target, where="pending")),
        )
    messages.success(
        request,
        gettext("Approved. %(result)s")
        % {"result": page_text.result_message(entry.target, result.message)},
    )
    return redirect("memory_page")


@login_required
@require_POST
def pending_reject(request: HttpRequest, entry_id: int) -> HttpResponse:
    services.memory_pending_reject(user=request.user, entry_id=entry_id, provenance=PAGE)
    messages.success(request, gettext("Rejected; nothing was saved."))
    return redirect("memory_page")


@login_required
@require_POST
def memory_import_view(request: HttpRequest) -> HttpResponse:
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _render_page(
            request,
            status=400,
            import_form=form,
            import_error=gettext("Check the fields below."),
        )
    target = form.cleaned_data["target"]
    try:
        upload = form.cleaned_data.get("file")
        text = read_upload(upload) if upload else form.cleaned_data.get("text", "")
        if not text.strip():
            raise ServiceError("no_text", gettext("Choose a file or paste its text."))
        result = services.memory_import(
            user=request.user,
            target=target,
            text=text,
            replace_all=form.cleaned_data["mode"] == "replace",
            provenance=IMPORT,
        )
    except ServiceError as exc:
        return _render_page(
            request,
            status=400,
            import_form=form,
            import_error=page_text.page_message(exc, target, where="import"),
        )
    messages.success(request, page_text.import_message(target, result))
    return redirect(reverse("memory_page") + f"#list-{target}")


@login_required
@require_POST
@errors_back_to("memory_page")
def memory_learned_remove(request: HttpRequest, import_id: int) -> HttpResponse:
    """Remove every note the learning of one of the person's chat imports wrote (one
    confirmation on the page; each change audited as theirs)."""
    removed = services.memory_entries_remove_by_writer(
        user=request.user, source=Source.IMPORT_REVIEW, client=str(import_id), provenance=PAGE
    )
    messages.success(request, removed.message())
    return redirect("memory_page")


@login_required
@require_GET
def memory_export_view(request: HttpRequest, target: str) -> HttpResponse:
    return export_response(user=request.user, target=_target_or_404(target))


@login_required
@require_GET
def memory_log(request: HttpRequest) -> HttpResponse:
    events = selectors.memory_events(user=request.user)
    verdict = request.GET.get("verdict", "")
    if verdict in MemoryEvent.Verdict.values:
        events = events.filter(verdict=verdict)
    else:
        verdict = ""
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    page.object_list = list(page.object_list)
    writers_attach(user=request.user, rows=page.object_list)
    for event in page.object_list:
        event.detail_shown = page_text.detail_shown(event)
    return render(
        request,
        "memory/log.html",
        {"page": page, "verdict": verdict, "verdicts": MemoryEvent.Verdict.choices},
    )
