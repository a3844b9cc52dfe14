"""Writes to conversations: starting turns, saving what the model produced, renaming,
pinning and deleting. Every function acts for `user` and refuses other people's rows."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext_lazy

from accounts.models import Profile
from accounts.services import quota_check, turn_account
from core.db.insert import insert_with_child
from core.exceptions import NotFound, ServiceError, lazy_format
from core.leases import Lease
from model_catalog.selectors import ModelChoice, default_choice

from . import answers, branches, turn_claim
from .ending import session_end_notify
from .lineage import compression_tip, lineage_ids
from .models import Message, Session, SystemPrompt
from .selectors import PathRow, access_session, turn_session_read
from .session_model import (
    check_model_choice,
    model_config_for,
    session_entry,
    session_model_apply,
)
from .thresholds import compression_schedule
from .titles import clean_title, derived_title, unique_title


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
    #: What the runner read for the turn's setup right after the claim, in the same trip to
    #: the database thread (agent.prompt.TurnFacts); None: not read yet.
    facts: Any = None
    #: The selected path up to the new user message (selectors.path_rows' rows) where the
    #: claim read it (a new message, not an edit, a regeneration or a pending one): what
    #: the first model call is sent, without reading it again. None: not read.
    path: list[PathRow] | None = None
    #: The person's profile, read with the claim (a message answered after a compression
    #: reads none); the setup's sections need it.
    profile: Profile | None = None

    @property
    def token(self) -> str:
        return self.lease.owner if self.lease else ""


def check_message_text(text: Any) -> str:
    if not isinstance(text, str):
        raise ServiceError("bad_request", gettext_lazy("The message must be text."))
    if not text.strip():
        raise ServiceError("empty_message", gettext_lazy("Type a message first."))
    limit = settings.HERMES_MAX_MESSAGE_CHARS
    if len(text) > limit:
        raise ServiceError(
            "message_too_long",
            lazy_format(
                gettext_lazy("The message is %(count)s characters; the limit is %(limit)s."),
                count=f"{len(text):,}",
                limit=f"{limit:,}",
            ),
        )
    return text


def claim_or_refuse(session: Session) -> Lease:
    """Lease the conversation for a branch change; a clear refusal if busy, or if a
    compression has closed the part since it was read."""
    lease = turn_claim.acquire_for_turn(session_id=session.pk)
    if lease is None:
        holder = turn_claim.refusal_kind(session_id=session.pk)
        if holder == turn_claim.SPLIT:
            raise branches.part_closed()
        _refuse_busy(session, compressing=holder == turn_claim.COMPRESS)
    return lease


def turn_begin(
    *,
    user: AbstractBaseUser,
    session_id: str | None,
    text: str | None,
    regenerate: bool = False,
    temporary: bool = False,
    model: str | None = None,
    message_id: Any = None,
    pending: bool = False,
) -> TurnStart:
    """Persist the user's message first (before any model call and before any wait), then
    lease the conversation (see turn_claim); the caller releases ``start.lease`` when done.

    The new message continues the selected path (see branches). With `message_id` and
    `text` it is an edit: a new alternative of that user message, and the path goes on
    from it. With `regenerate`, no new message: the answer `message_id` (default: the last
    one) gets a new alternative, answered again; the earlier answers stay as alternatives.
    `model` (a catalog reference) picks the model of a new conversation, or switches an
    existing one to it first (see session_model). `temporary` applies to a new
    conversation.

    While a compression holds the conversation — or when this message alone takes it past
    the compression threshold, which compresses it first (preflight) — a new message is
    saved and a TurnStart without a lease returned; with `pending` that saved message is
    answered later. Edits, regenerations and model switches need the lease: they are
    refused while the conversation is busy. The person's daily quota is checked first (a
    later turn's with the conversation's read, before anything is written); a message
    answered after a compression was counted when it was saved.
    """
    profile = None
    if session_id is None and not pending:
        quota, profile = turn_account(user=user)
        quota_check(user=user, quota=quota)
    if not (regenerate or pending):
        text = check_message_text(text)
    choice = check_model_choice(model) if model else None
    claim = functools.partial(
        _turn_claim,
        user=user,
        session_id=session_id,
        text=text,
        regenerate=regenerate,
        temporary=temporary,
        choice=choice,
        message_id=message_id,
        pending=pending,
        profile=profile,
    )
    for _attempt in range(2):
        # A compression may split the conversation while the claim reads it (on PostgreSQL
        # each statement sees what is committed when it starts); then nothing was written,
        # and claimed again the turn finds the continuation (an edit: that its part closed).
        with contextlib.suppress(_SplitMeanwhile):
            return claim()
    # No open part to go on in (a chain past its hop limit).
    raise ServiceError("session_ended", gettext_lazy("This conversation has ended."))


class _SplitMeanwhile(Exception):
    """The part a claim read was ended by a compression before the claim wrote to it."""


def _turn_claim(
    *,
    user: AbstractBaseUser,
    session_id: str | None,
    text: str | None,
    regenerate: bool,
    temporary: bool,
    choice: ModelChoice | None,
    message_id: Any,
    pending: bool,
    profile: Profile | None,
) -> TurnStart:
    """turn_begin's transaction, on checked input; _SplitMeanwhile: nothing written.
    `profile`: the person's, read already (a new conversation's)."""
    plain = not (regenerate or pending or message_id is not None)
    now = timezone.now()
    asks = not (regenerate or pending)  # a new user message is written
    # The counters move in the lease's own write: the messages this turn writes (the
    # user's, the answer), taken back below for what is not written after all.
    added = int(asks) + 1
    with transaction.atomic():
        session, lease, created, read = _turn_session(
            user=user,
            session_id=session_id,
            text=text,
            new=plain,
            message_id=message_id,
            temporary=temporary,
            choice=choice,
            added=added,
            now=now,
            account=not pending,
        )
        profile = profile or read
        switch = choice is not None and session_entry(session) != choice.ref
        holder = "" if lease is not None else turn_claim.refusal_kind(session_id=session.pk)
        if holder == turn_claim.SPLIT:
            raise _SplitMeanwhile
        compressing = holder == turn_claim.COMPRESS
        if lease is None and (switch or not plain or not compressing):
            # Only a plain new message is saved to wait for a compression.
            _refuse_busy(session, compressing=compressing)
        if lease is None:
            added = 1
            waiting = Session.objects.filter(pk=session.pk).exclude(
                end_reason=Session.EndReason.COMPRESSION
            )
            if not waiting.update(message_count=F("message_count") + added, last_activity_at=now):
                raise _SplitMeanwhile  # split since the holder was read
        if not created:
            session.message_count += added
            session.last_activity_at = now
        if switch:
            session_model_apply(session=session, choice=choice)
        user_message = parent = path = None
        if pending:
            user_message = parent = _pending_user_message(session)
        elif created:  # a new conversation's first message starts its one path
            path = []
        elif plain and lease is not None:
            # The tip is the new message's parent; the path, the model call's messages.
            path, parent = branches.path_with_tip(session_id=session.pk)
        elif plain:  # saved to wait for a compression: only its parent is needed
            parent = branches.path_tip(session_id=session.pk)
        else:
            parent = branches.branch_point(session, regenerate=regenerate, message_id=message_id)
        if lease is not None and (
            lease.took_over
            or not plain
            or (parent is not None and parent.status == Message.Status.STREAMING)
        ):
            # An answer still "streaming" in a conversation nobody else holds belongs to a
            # holder that died: it is closed as interrupted, its text kept. A plain message
            # that continues a closed answer under a lease that was free has none to close
            # here (a holder's recovery closes them before it frees the lease; the sweep of
            # abandoned answers takes any other).
            turn_claim.answers_interrupt([session.pk])
        assistant = None
        if asks:
            user_message = Message(
                session=session, role=Message.Role.USER, content=text, timestamp=now, parent=parent
            )
            if lease is not None and not created and _preflight(session, lease, user_message):
                lease = None
                session.message_count -= 1
            if lease is None:
                user_message.save(force_insert=True)
            else:
                # The message and the answer that replies to it: one INSERT on PostgreSQL.
                assistant = answers.answer_placeholder(session, now)
                insert_with_child(user_message, assistant, link="parent")
            if path is not None:
                path.append(
                    PathRow(user_message.pk, Message.Role.USER, "", 0, 0, text, "", None, "")
                )
        elif lease is not None:
            assistant = answers.answer_placeholder(session, now, parent)
            assistant.save(force_insert=True)
        if regenerate or message_id is not None:
            first = user_message or assistant
            branches.branch_changed_on_commit(
                session_id=session.pk, after=first.parent_id or 0, message_id=first.pk
            )
    if switch:
        session.refresh_from_db()  # the model, its settings and the prompt to freeze anew
    switched = session_id if session_id and session_id != session.pk else None
    return TurnStart(
        session, created, user_message, assistant, lease, switched, path=path, profile=profile
    )


def _turn_session(
    *,
    user: AbstractBaseUser,
    session_id: str | None,
    text: str | None,
    new: bool,
    message_id: Any,
    temporary: bool,
    choice: ModelChoice | None,
    added: int,
    now: datetime,
    account: bool,
) -> tuple[Session, Lease | None, bool, Profile | None]:
    """The conversation a turn works on, leased for the turn (None while a live turn or a
    compression holds it), whether it is new, and the person's profile where read: a new
    chat's conversation is created leased, started `now` with the `added` messages
    counted; an existing one is read with the person's `account` (quota and profile; the
    quota is checked before the lease) and gets its counters in the lease's UPDATE."""
    if session_id is None:
        if not new:
            raise NotFound(gettext_lazy("conversation"))
        fields = _session_fields(
            user=user, title_from=text or "", choice=choice, temporary=temporary
        )
        session, lease = turn_claim.open_for_turn(
            **fields, message_count=added, started_at=now, last_activity_at=now
        )
        return session, lease, True, None
    profile = None
    if account:
        session, quota, profile = turn_session_read(user=user, session_id=session_id)
        quota_check(user=user, quota=quota)
    else:
        session = access_session(user=user, session_id=session_id, with_prompt=True)
    if message_id is not None:
        # An edit or a regeneration names a message of this very part: no redirect to a
        # continuation, the id must be in the session asked for.
        branches.check_open_part(session, message_id)
    elif session.end_reason == Session.EndReason.COMPRESSION:
        # The conversation goes on in its newest continuation.
        session = compression_tip(session)
    lease = turn_claim.acquire_for_turn(
        session_id=session.pk,
        values={"last_activity_at": now},
        increments={"message_count": added},
    )
    return session, lease, False, profile


def session_open(
    *,
    user: AbstractBaseUser,
    title_from: str,
    choice: ModelChoice | None = None,
    temporary: bool = False,
    source: str = "web",
    history: list[tuple[str, str]] = (),
) -> Session:
    """A new conversation titled after `title_from`, on `choice` (default: the default
    model). `history` — (role, text) pairs, role "user" or "assistant" — is written first
    as one path: what an API client brought from elsewhere, answered by the next turn."""
    fields = _session_fields(
        user=user, title_from=title_from, choice=choice, temporary=temporary, source=source
    )
    if not history:
        return Session.objects.create(**fields)
    with transaction.atomic():
        session = Session.objects.create(**fields, message_count=len(history))
        for role, text in history:
            answer = role == Message.Role.ASSISTANT
            Message.objects.create(
                session=session,
                role=role,
                content=text,
                status=Message.Status.COMPLETE if answer else "",
                finish_reason="stop" if answer else "",
            )
        branches.path_link_new_session(session_id=session.pk)
    return session


def _session_fields(
    *,
    user: AbstractBaseUser,
    title_from: str,
    choice: ModelChoice | None,
    temporary: bool,
    source: str = "web",
) -> dict[str, Any]:
    """A new conversation's columns (see session_open)."""
    choice = choice or default_choice()
    return {
        "owner": user,
        "title": unique_title(user=user, base=derived_title(title_from)),
        "title_source": Session.TitleSource.DERIVED,
        "model": choice.model_id,
        "model_config": model_config_for(choice),
        "temporary": temporary,
        "source": source,
    }


def _refuse_busy(session: Session, *, compressing: bool) -> None:
    if compressing:
        raise ServiceError(
            "compressing",
            gettext_lazy(
                "Earlier messages are being compressed; your message is saved and will be answered."
            ),
            session=session.pk,
        )
    raise ServiceError(
        "turn_in_progress",
        gettext_lazy("The agent is still answering in this conversation. Wait or press Stop."),
        session=session.pk,
    )


def _pending_user_message(session: Session) -> Message:
    """The user message saved while a compression held the conversation: the last one on
    the selected path, with nothing after it yet. Call holding the lease."""
    tip = branches.path_tip(session_id=session.pk)
    if tip is None or tip.role != Message.Role.USER:
        raise ServiceError(
            "nothing_to_regenerate", gettext_lazy("There is no message waiting for an answer.")
        )
    return tip


def _preflight(session: Session, lease: Lease, message: Message) -> bool:
    """A message that takes the conversation past the compression threshold compresses it
    before the model call (Hermes' preflight): the lease goes back to the compression.
    `message`: the new one, not saved yet (it is written after this, with the answer)."""
    if not compression_schedule(session_id=session.pk, session=session, after=message):
        return False
    lease.release(message_count=F("message_count") - 1)  # no answer is written now
    return True


def system_prompt_store(*, session: Session, text: str) -> SystemPrompt:
    """Freeze `text` as the session's system prompt (deduplicated by sha256: a text stored
    before is kept as it is, by an INSERT that ignores the conflict)."""
    prompt = SystemPrompt(hash=SystemPrompt.digest(text), prompt=text)
    SystemPrompt.objects.bulk_create([prompt], ignore_conflicts=True)
    Session.objects.filter(pk=session.pk).update(system_prompt=prompt)
    session.system_prompt = prompt
    return prompt


def branch_select(*, user: AbstractBaseUser, session_id: Any, message_id: Any) -> list[int]:
    """Select the alternative `message_id`, with its most recent continuation, as the
    conversation's path (what the chat shows and the model sees next); returns the ids of
    the path from that message on. Refused while a turn or a compression holds the
    conversation, and for a compressed (ended) part."""
    session = access_session(user=user, session_id=session_id)
    target = branches.check_open_part(session, message_id)
    lease = claim_or_refuse(session)
    try:
        with transaction.atomic():
            if target.active:
                return [target.pk]
            current = session.messages.filter(parent_id=target.parent_id, active=True).first()
            if current is not None:
                branches.path_drop_from(session_id=session.pk, first_id=current.pk)
            path = branches.path_below(session_id=session.pk, top=target)
            Message.objects.filter(pk__in=path).update(active=True)
            branches.branch_changed_on_commit(
                session_id=session.pk, after=target.parent_id or 0, message_id=target.pk
            )
    finally:
        lease.release()
    return path


def session_rename(*, user: AbstractBaseUser, session_id: str, title: str) -> Session:
    session = access_session(user=user, session_id=session_id)
    title = clean_title(title)
    if not title:
        raise ServiceError(
            "invalid_title", gettext_lazy("A title needs at least one visible character.")
        )
    try:
        with transaction.atomic():
            Session.objects.filter(pk=session.pk).update(
                title=title, title_source=Session.TitleSource.USER
            )
    except IntegrityError:
        raise ServiceError(
            "duplicate_title",
            lazy_format(
                gettext_lazy("You already have a conversation titled “%(title)s”."), title=title
            ),
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
