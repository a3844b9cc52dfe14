from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from core.exceptions import ServiceError, english, lazy_format
from core.markdown import render_markdown
from core.middleware import errors_back_to
from model_catalog.apis import picker_entries

from . import services
from .agent.runner import STOPPED_AFTER_TOOLS
from .agent.tools import chip_summary, tool_failed
from .branches import alternatives_of
from .compression import summary_text
from .lineage import compression_chain, compression_tip
from .models import Message, Session
from .session_model import session_entry, switch_marker_text


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    recent = (
        Session.objects.filter(owner=request.user, archived=False)
        .only("id", "title", "last_activity_at", "message_count")
        .order_by("-pinned", "-last_activity_at")[:10]
    )
    return render(request, "dashboard.html", {"recent_sessions": recent})


# What a stopped or failed answer says under it (by the error code saved with it).
END_NOTES = {
    "stopped": gettext_lazy("Answer stopped."),
    "rate_limited": gettext_lazy("The model is rate-limited right now; try again in a moment."),
    "llm_unavailable": gettext_lazy("The connection to the model server failed."),
    "llm_refused": gettext_lazy("The model server refused the connection: is it running?"),
    "llm_timeout": gettext_lazy("The model server timed out."),
    "llm_server_error": gettext_lazy("The model server answered with a server error (HTTP 5xx)."),
    "auth_failed": gettext_lazy("The model refused the configured API key (check OPENAI_API_KEY)."),
    "bad_request": gettext_lazy("The model rejected the request."),
    "context_too_long": gettext_lazy(
        "The conversation is too long for the model's context window."
    ),
    "interrupted": gettext_lazy("The connection to the model was cut mid-answer."),
    "process_died": gettext_lazy(
        "The server stopped while answering. Press Regenerate for a full answer."
    ),
    "realtime_unavailable": gettext_lazy("The server lost its message broker mid-answer."),
    "internal_error": gettext_lazy("Something went wrong on our side."),
}


def end_note(message: Message) -> str:
    """The note under a stopped or failed answer, in the active language ("" for others)."""
    if message.status == Message.Status.INTERRUPTED:
        if message.finish_reason == "stopped":
            return str(END_NOTES["stopped"])
        reason = END_NOTES.get(message.finish_reason, gettext_lazy("The answer was interrupted."))
        return gettext("Interrupted: %(reason)s") % {"reason": reason}
    if message.status == Message.Status.FAILED:
        reason = END_NOTES.get(message.finish_reason, gettext_lazy("Something went wrong."))
        return gettext("No answer. %(reason)s Your message is saved.") % {"reason": reason}
    return ""


def answer_text(message: Message) -> str:
    """An answer's text as the chat shows it: the note that stands in for an answer at the
    tool-round limit is saved in English (the model reads it back), shown in the reader's
    language."""
    rounds = re.search(r"\d+", message.content) if message.finish_reason == "tool_limit" else None
    if rounds and message.content == english(lazy_format(STOPPED_AFTER_TOOLS, rounds=rounds[0])):
        return str(lazy_format(STOPPED_AFTER_TOOLS, rounds=rounds[0]))
    return message.content


SIDEBAR_PAGE = 50


def sidebar_page(
    user: Any, *, offset: int = 0, query: str = ""
) -> tuple[list[Session], int | None]:
    """One page of the chat sidebar (pinned first, then the latest), each conversation once,
    at its newest part, under its original title; and the offset of the next page, if any.
    ``query`` keeps the titles containing it (the sidebar's filter)."""
    rows = (
        Session.objects.filter(owner=user, archived=False)
        .exclude(end_reason=Session.EndReason.COMPRESSION)
        .only("id", "title", "pinned", "last_activity_at", "parent_id", "source")
        .order_by("-pinned", "-last_activity_at", "-id")
    )
    if query:
        rows = rows.filter(title__icontains=query)
    # One more than a page tells whether another page exists without a COUNT.
    sessions = list(rows[offset : offset + SIDEBAR_PAGE + 1])
    more = len(sessions) > SIDEBAR_PAGE
    sessions = sessions[:SIDEBAR_PAGE]
    for s in sessions:
        s.display_title = display_title(s)
    return sessions, offset + SIDEBAR_PAGE if more else None


def display_title(session: Session) -> str:
    """'Deploy script #3' is shown as 'Deploy script': the chain is one conversation."""
    title = session.title or gettext("Untitled")
    return re.sub(r" #\d+$", "", title) if session.parent_id else title


def _thread(sessions: list[Session], *, after: int = 0) -> list[dict[str, Any]]:
    """The selected path grouped for display: each assistant message with the tool calls it made
    and their results (as chips). A compression chain reads as one conversation: messages
    carried into a continuation are shown once, and its summary becomes a marker."""
    rows = list(
        Message.objects.filter(session__in=sessions, id__gt=after, active=True)
        .exclude(kind=Message.Kind.CARRIED)
        .order_by("id")
    )
    # The selected path is shown; alternatives can be switched (and messages edited) only
    # in the part still open for turns (a compressed part is history).
    open_ids = {s.pk for s in sessions if s.ended_at is None}
    alternatives = alternatives_of(sorted(open_ids))
    results = {m.tool_call_id: m for m in rows if m.role == Message.Role.TOOL}
    items: list[dict[str, Any]] = []
    for m in rows:
        if m.kind == Message.Kind.MODEL_SWITCH:
            items.append({"message": m, "model_switch": switch_marker_text(m.content), "chips": []})
            continue
        if m.role == Message.Role.TOOL or m.role == Message.Role.SYSTEM:
            continue
        if m.kind == Message.Kind.SUMMARY:
            items.append(
                {"message": m, "summary": render_markdown(summary_text(m.content)), "chips": []}
            )
            continue
        chips = []
        for call in m.tool_calls or []:
            fn = call.get("function", {})
            name, arguments = fn.get("name", "tool"), fn.get("arguments", "")
            result = results.get(call.get("id"))
            chips.append(
                {
                    "name": name,
                    "arguments": arguments,
                    "result": result.content if result else "",
                    "summary": chip_summary(name, result.content, arguments)
                    if result
                    else gettext("no result"),
                    "ok": bool(result) and not tool_failed(result.content),
                }
            )
        text = answer_text(m) if m.role == Message.Role.ASSISTANT else m.content
        items.append(
            {
                "message": m,
                "text": text,
                "alternatives": alternatives.get(m.pk),
                "editable": m.session_id in open_ids
                and m.role == Message.Role.USER
                and m.kind == Message.Kind.REGULAR,
                "chips": chips,
                "html": render_markdown(text) if m.role == Message.Role.ASSISTANT else None,
                "note": end_note(m),
            }
        )
    return items


@login_required
def chat(request: HttpRequest, session_id: str | None = None) -> HttpResponse:
    session = None
    chain: list[Session] = []
    if session_id is not None:
        session = services.access_session(user=request.user, session_id=session_id)
        tip = compression_tip(session)
        if tip.pk != session.pk:
            return redirect("chat_session", session_id=tip.pk)
        chain = compression_chain(session)
    streaming = bool(session) and session.messages.filter(status=Message.Status.STREAMING).exists()
    sessions, next_offset = sidebar_page(request.user)
    return render(
        request,
        "chat/chat.html",
        {
            "session": session,
            "sessions": sessions,
            "sessions_next": next_offset,
            "thread": _thread(chain) if session else [],
            "display_title": display_title(session) if session else "",
            "streaming": streaming,
            "max_chars": settings.HERMES_MAX_MESSAGE_CHARS,
            "heartbeat": settings.HERMES_LEASE_HEARTBEAT,
            "temporary_days": settings.HERMES_TEMPORARY_CHAT_DAYS,
            "models": picker_entries(),
            "current_model": session_entry(session) if session else "",
        },
    )


@login_required
@require_GET
def chat_list(request: HttpRequest) -> JsonResponse:
    """A page of the sidebar as JSON, for scrolling down (?offset=) and the filter (?q=)."""
    try:
        offset = max(0, int(request.GET.get("offset", "0")))
    except ValueError:
        offset = 0
    # Past any real list, and within the 64-bit OFFSET the database accepts.
    offset = min(offset, 2**31)
    query = request.GET.get("q", "").strip()[:100]
    sessions, next_offset = sidebar_page(request.user, offset=offset, query=query)
    items = [
        {
            "id": s.id,
            "title": s.display_title,
            "pinned": s.pinned,
            "imported_from": s.imported_from,
            "url": reverse("chat_session", args=[s.id]),
        }
        for s in sessions
    ]
    return JsonResponse({"items": items, "next_offset": next_offset})


@login_required
@require_GET
def chat_messages(request: HttpRequest, session_id: str) -> HttpResponse:
    """Rendered messages after ?after=<id> (for finished answers and resyncs)."""
    session = services.access_session(user=request.user, session_id=session_id)
    try:
        after = max(0, int(request.GET.get("after", "0")))
    except ValueError:
        after = 0
    return render(request, "chat/_messages.html", {"thread": _thread([session], after=after)})


@login_required
@require_POST
@errors_back_to("chat_session", args=["session_id"], section="options")
def chat_rename(request: HttpRequest, session_id: str) -> HttpResponse:
    services.session_rename(
        user=request.user, session_id=session_id, title=request.POST.get("title", "")
    )
    return redirect("chat_session", session_id=session_id)


@login_required
@require_POST
def chat_pin(request: HttpRequest, session_id: str) -> HttpResponse:
    services.session_set_flags(
        user=request.user, session_id=session_id, pinned=request.POST.get("pinned") == "1"
    )
    return redirect("chat_session", session_id=session_id)


@login_required
@require_POST
def chat_delete(request: HttpRequest, session_id: str) -> HttpResponse:
    services.session_delete(user=request.user, session_id=session_id)
    messages.success(request, gettext("Conversation deleted."))
    return redirect("chat")


# --- Sessions page: conversation list and search (L2 search) ---------------------------
# Imported here so this section stays self-contained next to the chat views above.
from .search.pages import list_url, session_list_context  # noqa: E402
from .search.service import search_summary_start  # noqa: E402


@login_required
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    return render(request, "sessions/list.html", session_list_context(request))


@login_required
@require_POST
def session_summarise(request: HttpRequest) -> HttpResponse:
    """The no-JavaScript path of the "Summarise" button; static/js/search.js uses the API.

    Handled here, not by ServiceErrorMiddleware: the conversation comes from a form field,
    not the URL, so an unknown (or someone else's) one is a refusal flashed on the search
    page, not a 404."""
    try:
        search_summary_start(
            owner=request.user,
            query=request.POST.get("q", ""),
            session_id=request.POST.get("session_id", ""),
        )
    except ServiceError as exc:
        messages.error(request, exc.text)
    else:
        messages.success(request, gettext("Summarising in the background; reload to see it."))
    return redirect(list_url(request.POST.dict()))
