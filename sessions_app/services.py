"""Writes to conversations: starting turns, saving what the model produced, renaming,
pinning and deleting. Every function acts for `user` and refuses other people's rows."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.services import quota_check
from core.exceptions import NotFound, ServiceError
from core.leases import Lease
from usage.cost import CallUsage
from usage.services import session_counters

from . import turn_claim
from .ending import session_end_notify
from .lineage import compression_tip, lineage_ids
from .models import Message, Session, SystemPrompt
from .thresholds import compression_schedule

TITLE_MAX = 100
_INVISIBLE = re.compile(
    r"[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


def access_session(*, user: AbstractBaseUser, session_id: Any) -> Session:
    """The user's session with that id; NotFound for missing and for other users' ids."""
    if not isinstance(session_id, str) or not session_id:
        raise NotFound("conversation")
    session = Session.objects.filter(pk=session_id, owner=user).first()
    if session is None:
        raise NotFound("conversation")
    return session


def clean_title(text: str) -> str:
    """Control, zero-width and bidi characters stripped, whitespace collapsed, ≤100 chars."""
    text = _INVISIBLE.sub(" ", unicodedata.normalize("NFC", text or ""))
    text = " ".join(text.split())
    return text[:TITLE_MAX].strip()


def _derived_title(text: str) -> str:
    first_line = clean_title(text.strip().splitlines()[0] if text.strip() else "")
    if len(first_line) > 60:
        first_line = first_line[:57].rstrip() + "…"
    return first_line or "New conversation"


def _unique_title(*, user: AbstractBaseUser, base: str, exclude: str | None = None) -> str:
    taken = set(
        Session.objects.filter(owner=user, title__startswith=base[:90])
        .exclude(pk=exclude)
        .values_list("title", flat=True)
    )
    if base not in taken:
        return base
    n = 2
    while f"{base[: TITLE_MAX - 6]} ({n})" in taken:
        n += 1
    return f"{base[: TITLE_MAX - 6]} ({n})"


@dataclass(frozen=True)
class TurnStart:
    """A turn that may start (`lease` held, `assistant_message` streaming), or a message
    saved while the conversation is compressed (`lease` None): the caller waits for the
    compression, then answers it with ``turn_begin(..., pending=True)``."""

    session: Session
    created: bool
    user_message: Message | None
    assistant_message: Message | None
    lease: Lease | None
    #: The id the client asked for when the conversation had moved on to a continuation.
    switched_from: str | None = None

    @property
    def token(self) -> str:
        return self.lease.owner if self.lease else ""


def check_message_text(text: Any) -> str:
    if not isinstance(text, str):
        raise ServiceError("bad_request", "The message must be text.")
    if not text.strip():
        raise ServiceError("empty_message", "Type a message first.")
    limit = settings.HERMES_MAX_MESSAGE_CHARS
    if len(text) > limit:
        raise ServiceError(
            "message_too_long",
            f"The message is {len(text):,} characters; the limit is {limit:,}.",
        )
    return text


def turn_begin(
    *,
    user: AbstractBaseUser,
    session_id: str | None,
    text: str | None,
    regenerate: bool = False,
    temporary: bool = False,
    pending: bool = False,
) -> TurnStart:
    """Persist the user's message first (before any model call and before any wait), then
    lease the conversation (see turn_claim); the caller releases ``start.lease`` when done.

    While a compression holds the conversation — or when this message alone takes it past
    the compression threshold, which compresses it first (preflight) — the message is saved
    and a TurnStart without a lease returned. With `pending`, no new message: the last user
    message (saved that way) is answered. With `regenerate`, the last answer (and its tool
    calls) after the last user message is removed and answered again. `temporary` applies
    to a new conversation.
    """
    if not pending:
        quota_check(user=user)
    if not (regenerate or pending):
        text = check_message_text(text)
    with transaction.atomic():
        session, created = _turn_session(
            user=user, session_id=session_id, text=text, new=not (regenerate or pending),
            temporary=temporary,
        )  # fmt: skip
        lease = turn_claim.acquire_for_turn(session_id=session.pk)
        compressing = lease is None and turn_claim.is_compressing(session_id=session.pk)
        if lease is None and (regenerate or pending or not compressing):
            _refuse_busy(session, compressing=compressing)
        now = timezone.now()
        if lease is not None:
            # An answer still "streaming" in a conversation nobody else holds belongs to a
            # holder that died: it is closed as interrupted, its text kept.
            turn_claim.answers_interrupt([session.pk])
        if regenerate or pending:
            last_user = _answer_again(session, lease=lease, keep_last_user=pending)
            user_message = last_user if pending else None
        else:
            user_message = Message.objects.create(
                session=session, role=Message.Role.USER, content=text, timestamp=now
            )
            Session.objects.filter(pk=session.pk).update(
                message_count=F("message_count") + 1, last_activity_at=now
            )
            if lease is not None and not created and _preflight(session, lease):
                lease = None
        assistant = None
        if lease is not None:
            assistant = Message.objects.create(
                session=session,
                role=Message.Role.ASSISTANT,
                status=Message.Status.STREAMING,
                model=settings.HERMES_MODEL,
                timestamp=now,
            )
            Session.objects.filter(pk=session.pk).update(
                message_count=F("message_count") + 1, last_activity_at=now
            )
    session.refresh_from_db()
    switched = session_id if session_id and session_id != session.pk else None
    return TurnStart(session, created, user_message, assistant, lease, switched)


def _turn_session(
    *, user: AbstractBaseUser, session_id: str | None, text: str | None, new: bool, temporary: bool
) -> tuple[Session, bool]:
    """The conversation a turn works on (created for a new chat), and whether it is new."""
    if session_id is None:
        if not new:
            raise NotFound("conversation")
        session = Session.objects.create(
            owner=user,
            title=_unique_title(user=user, base=_derived_title(text or "")),
            title_source=Session.TitleSource.DERIVED,
            model=settings.HERMES_MODEL,
            temporary=temporary,
        )
        return session, True
    session = access_session(user=user, session_id=session_id)
    if session.end_reason == Session.EndReason.COMPRESSION:
        # The conversation goes on in its newest continuation.
        session = compression_tip(session)
    return session, False


def _refuse_busy(session: Session, *, compressing: bool) -> None:
    if compressing:
        raise ServiceError(
            "compressing",
            "Earlier messages are being compressed; your message is saved and will be answered.",
            session=session.pk,
        )
    raise ServiceError(
        "turn_in_progress",
        "The agent is still answering in this conversation. Wait or press Stop.",
        session=session.pk,
    )


def _answer_again(session: Session, *, lease: Lease | None, keep_last_user: bool) -> Message:
    """The last user message, with whatever followed it removed (a regeneration) or nothing
    following it (a message saved during a compression). Call holding the lease."""
    assert lease is not None
    last_user = session.messages.filter(role=Message.Role.USER).order_by("-id").first()
    later = session.messages.filter(id__gt=last_user.id) if last_user else None
    if last_user is None or (keep_last_user and later.exists()):
        lease.release()
        raise ServiceError("nothing_to_regenerate", "There is no answer to regenerate.")
    removed, _ = later.delete()
    Session.objects.filter(pk=session.pk).update(message_count=F("message_count") - removed)
    return last_user


def _preflight(session: Session, lease: Lease) -> bool:
    """A message that takes the conversation past the compression threshold compresses it
    before the model call (Hermes' preflight): the lease goes back to the compression."""
    if not compression_schedule(session_id=session.pk):
        return False
    lease.release()
    return True


def system_prompt_store(*, session: Session, text: str) -> SystemPrompt:
    """Freeze `text` as the session's system prompt (deduplicated by sha256)."""
    prompt, _ = SystemPrompt.objects.get_or_create(
        hash=SystemPrompt.digest(text), defaults={"prompt": text}
    )
    Session.objects.filter(pk=session.pk).update(system_prompt=prompt)
    session.system_prompt = prompt
    return prompt


def user_message_set_context(*, message_id: int, context_block: str) -> None:
    Message.objects.filter(pk=message_id).update(context_block=context_block)


def assistant_save_progress(*, message_id: int, content: str) -> None:
    Message.objects.filter(pk=message_id, status=Message.Status.STREAMING).update(content=content)


def assistant_finish(
    *,
    message_id: int,
    content: str,
    status: str,
    usage: CallUsage | None,
    finish_reason: str = "",
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str = "",
) -> Message:
    """Close an assistant message and add its model call to the session's counters."""
    with transaction.atomic():
        message = Message.objects.select_for_update().get(pk=message_id)
        message.content = content
        message.status = status
        message.finish_reason = finish_reason
        message.tool_calls = tool_calls or None
        message.reasoning = reasoning
        fields = ["content", "status", "finish_reason", "tool_calls", "reasoning"]
        counters: dict[str, Any] = {"last_activity_at": timezone.now()}
        if usage is not None:
            message.model = usage.model
            message.prompt_tokens = usage.prompt_tokens
            message.completion_tokens = usage.completion_tokens
            message.cached_tokens = usage.cached_tokens
            message.reasoning_tokens = usage.reasoning_tokens
            message.cost_usd = usage.cost_usd
            message.token_count = usage.completion_tokens
            fields += [
                "model",
                "prompt_tokens",
                "completion_tokens",
                "cached_tokens",
                "reasoning_tokens",
                "cost_usd",
                "token_count",
            ]
            counters.update(session_counters([usage]))
        if tool_calls:
            counters["tool_call_count"] = F("tool_call_count") + len(tool_calls)
        message.save(update_fields=fields)
        Session.objects.filter(pk=message.session_id).update(**counters)
    return message


def assistant_continue(*, session_id: str) -> Message:
    """A fresh streaming assistant message after a round of tool calls."""
    with transaction.atomic():
        message = Message.objects.create(
            session_id=session_id,
            role=Message.Role.ASSISTANT,
            status=Message.Status.STREAMING,
            model=settings.HERMES_MODEL,
        )
        Session.objects.filter(pk=session_id).update(message_count=F("message_count") + 1)
    return message


def tool_message_add(
    *, session_id: str, tool_call_id: str, tool_name: str, content: str
) -> Message:
    with transaction.atomic():
        message = Message.objects.create(
            session_id=session_id,
            role=Message.Role.TOOL,
            tool_call_id=tool_call_id or "missing",
            tool_name=tool_name,
            content=content,
        )
        Session.objects.filter(pk=session_id).update(message_count=F("message_count") + 1)
    return message


def session_rename(*, user: AbstractBaseUser, session_id: str, title: str) -> Session:
    session = access_session(user=user, session_id=session_id)
    title = clean_title(title)
    if not title:
        raise ServiceError("invalid_title", "A title needs at least one visible character.")
    try:
        with transaction.atomic():
            Session.objects.filter(pk=session.pk).update(
                title=title, title_source=Session.TitleSource.USER
            )
    except IntegrityError:
        raise ServiceError(
            "duplicate_title", f"You already have a conversation titled {title!r}."
        ) from None
    session.title, session.title_source = title, Session.TitleSource.USER
    return session


def session_set_flags(
    *,
    user: AbstractBaseUser,
    session_id: str,
    pinned: bool | None = None,
    archived: bool | None = None,
) -> Session:
    session = access_session(user=user, session_id=session_id)
    changes = {k: v for k, v in {"pinned": pinned, "archived": archived}.items() if v is not None}
    if changes:
        Session.objects.filter(pk=session.pk).update(**changes)
        for key, value in changes.items():
            setattr(session, key, value)
    return session


def session_delete(*, user: AbstractBaseUser, session_id: str) -> None:
    """Delete a conversation with its whole compression lineage (one row in the list); the
    memory provider hears that its open part ended."""
    session = access_session(user=user, session_id=session_id)
    for open_part in Session.objects.filter(pk__in=lineage_ids(session), ended_at__isnull=True):
        session_end_notify(session=open_part)
    with transaction.atomic():
        Session.objects.filter(owner=user, pk__in=lineage_ids(session)).delete()


def temporary_sessions_expire() -> int:
    """Delete temporary conversations past their retention; returns how many."""
    cutoff = timezone.now() - timedelta(days=settings.HERMES_TEMPORARY_CHAT_DAYS)
    expired = Session.objects.filter(temporary=True, started_at__lt=cutoff)
    count = expired.count()
    with transaction.atomic():
        expired.delete()
    return count
