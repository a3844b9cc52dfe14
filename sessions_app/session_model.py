"""Which model a conversation talks to, and switching it.

The choice is stored on the session: ``model`` (the model id, as in Hermes' state.db) and
``model_config["entry"]`` (the catalog reference, "env" or a row's id) with its display
name. A switch ends the current frozen system prompt (the next turn freezes one for the new
model: its window and name are part of it) and adds a visible "Switched to <name>" marker,
a system-role message that is never sent to the model. A chat whose model was deleted or
disabled is switched to the default model, with a marker that says so. The marker is saved
in English (the API and exports read it as it was written) and shown in the reader's
language (:func:`switch_marker_text`).
"""

from __future__ import annotations

import re

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext_lazy

from accounts.language import speaking_to
from core.exceptions import NotFound, ServiceError, english, lazy_format
from core.realtime import publish, session_group
from model_catalog.selectors import ModelChoice, choice_for, default_choice

from . import turn_claim
from .branches import path_tip
from .models import Message, Session

SWITCHED = gettext_lazy("Switched to %(model)s")
SWITCHED_FROM_GONE = gettext_lazy("Switched to %(model)s: %(gone)s is no longer available")
# The two markers as saved (SWITCHED_FROM_GONE when the second part is there).
_SAVED_MARKER = re.compile(r"Switched to (?P<model>.+?)(?:: (?P<gone>.+) is no longer available)?")


def switch_marker_text(content: str) -> str:
    """A switch marker's saved (English) text in the active language; other text as it is."""
    saved = _SAVED_MARKER.fullmatch(content)
    if saved is None:
        return content
    if saved["gone"] is None:
        return str(lazy_format(SWITCHED, model=saved["model"]))
    return str(lazy_format(SWITCHED_FROM_GONE, model=saved["model"], gone=saved["gone"]))


def model_config_for(choice: ModelChoice) -> dict[str, str]:
    return {"entry": choice.ref, "entry_name": choice.name}


def session_entry(session: Session, key: str = "entry") -> str:
    """``model_config[key]`` as text ("" when absent; imported configs may be any JSON)."""
    config = session.model_config
    return str(config.get(key) or "") if isinstance(config, dict) else ""


def check_model_choice(ref: str) -> ModelChoice:
    """The enabled model ``ref`` names; ServiceError for unknown, disabled or deleted ones."""
    choice = choice_for(str(ref))
    if choice is None:
        raise ServiceError(
            "model_unavailable", gettext_lazy("That model is not available; pick another.")
        )
    return choice


def session_model_choice(session: Session) -> ModelChoice | None:
    """The session's model; None when the one it used is gone (deleted or disabled).
    Sessions from before the catalog (no entry recorded) use the default model.

    Read once per instance and entry: a turn asks in its preflight (the window) and its
    setup (the model), on the conversation it read; the next turn reads both anew."""
    ref = session_entry(session)
    known = session.__dict__.get("_model_choice")
    if known is not None and known[0] == ref:
        return known[1]
    choice = choice_for(ref) if ref else default_choice()
    session.__dict__["_model_choice"] = (ref, choice)
    return choice


def session_model_apply(*, session: Session, choice: ModelChoice, gone: str = "") -> Message:
    """Switch ``session`` to ``choice`` with a marker saying so (and that the model named
    ``gone`` is no longer available, when given); the caller holds the conversation (its
    turn claim) or a transaction that created it. Tabs hear a ``model_switched`` notice,
    in the owner's language, once committed."""
    said = (
        lazy_format(SWITCHED_FROM_GONE, model=choice.name, gone=gone)
        if gone
        else lazy_format(SWITCHED, model=choice.name)
    )
    text = english(said)
    with speaking_to(session.owner_id):
        shown = str(said)
    now = timezone.now()
    with transaction.atomic():
        Session.objects.filter(pk=session.pk).update(
            model=choice.model_id,
            model_config=model_config_for(choice),
            system_prompt=None,
            message_count=F("message_count") + 1,
            last_activity_at=now,
        )
        marker = Message.objects.create(
            session=session,
            role=Message.Role.SYSTEM,
            kind=Message.Kind.MODEL_SWITCH,
            content=text,
            timestamp=now,
            parent=path_tip(session_id=session.pk),
        )
        event = {
            "type": "notice",
            "session": session.pk,
            "kind": "model_switched",
            "text": shown,
            "model": {"id": choice.ref, "name": choice.name},
            "message_id": marker.pk,
        }
        transaction.on_commit(lambda: publish(session_group(session.pk), event))
    session.model, session.model_config = choice.model_id, model_config_for(choice)
    session.system_prompt = None
    return marker


def session_model_switch(*, user: AbstractBaseUser, session_id: str, ref: str) -> Session:
    """Switch the user's conversation to the enabled model ``ref`` (a no-op if it already
    uses it). Refused while a turn or a compression holds the conversation."""
    choice = check_model_choice(ref)
    with transaction.atomic():
        # Another user's id is as missing as an unknown one.
        session = Session.objects.select_for_update().filter(pk=session_id, owner=user).first()
        if session is None:
            raise NotFound(gettext_lazy("conversation"))
        if session.ended_at is not None:
            raise ServiceError("session_ended", gettext_lazy("This conversation has ended."))
        if turn_claim.holder_kind(session_id=session.pk):
            raise ServiceError(
                "turn_in_progress",
                gettext_lazy(
                    "The agent is still answering in this conversation. Wait or press Stop."
                ),
            )
        if session_entry(session) != choice.ref:
            session_model_apply(session=session, choice=choice)
    return session


def session_model_for_turn(session: Session) -> tuple[ModelChoice, str]:
    """The model for a turn and, when its own model is gone, the fallback marker's (English)
    text (the session is then switched to the default model). Call while holding the turn
    claim."""
    choice = session_model_choice(session)
    if choice is not None:
        return choice, ""
    gone = session_entry(session, "entry_name") or session.model or "its model"
    fallback = default_choice()
    marker = session_model_apply(session=session, choice=fallback, gone=gone)
    return fallback, marker.content
