"""How a request's message list is matched to stored conversations (no server needed)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from model_catalog.selectors import env_choice
from openai_api.conversations import TurnPlan, conversation_items, conversation_plan
from sessions_app.models import API_SOURCE, Message, Session
from tests.factories import MessageFactory, SessionFactory, conversation_with

pytestmark = pytest.mark.django_db


def plan(user, *messages: tuple[str, str], conversation_id: str | None = None) -> TurnPlan:
    return conversation_plan(
        user=user, messages=list(messages), conversation_id=conversation_id, choice=env_choice()
    )


def compressed(owner) -> tuple[Session, Session]:
    """A conversation compressed once: the first part ended, the continuation opens with a
    summary and a carried copy of the last exchange, then goes on."""
    first = conversation_with(owner, "Plan the trip", "Book the train")
    ended = timezone.now()
    Session.objects.filter(pk=first.pk).update(
        end_reason=Session.EndReason.COMPRESSION,
        ended_at=ended,
        started_at=ended - timedelta(hours=1),
    )
    tip = SessionFactory(owner=owner, parent=first, started_at=ended + timedelta(seconds=1))
    MessageFactory(session=tip, role="user", kind="summary", content="Summary: a trip.")
    MessageFactory(session=tip, role="user", kind="carried", content="Book the train")
    MessageFactory(session=tip, role="assistant", kind="carried", content="Answer 1.")
    MessageFactory(session=tip, role="user", content="And a hotel")
    MessageFactory(session=tip, role="assistant", content="Answer 2.")
    return first, tip


def test_the_view_spans_compressed_parts_once(owner):
    _first, tip = compressed(owner)
    view = [(i.role, i.text) for i in conversation_items(tip)]
    assert view == [
        ("user", "Plan the trip"),
        ("assistant", "Answer 0."),
        ("user", "Book the train"),
        ("assistant", "Answer 1."),
        ("user", "And a hotel"),
        ("assistant", "Answer 2."),
    ]


def test_a_resent_history_of_a_compressed_conversation_continues_its_tip(owner):
    first, tip = compressed(owner)
    history = [i for item in conversation_items(tip) for i in [(item.role, item.text)]]
    assert plan(owner, *history, ("user", "And a car")) == TurnPlan(tip.pk, "And a car")
    # Going back into the compressed part cannot branch there: a new conversation.
    again = plan(owner, *history[:2], ("user", "Something else"))
    assert again.session_id not in (first.pk, tip.pk)


def test_answers_before_and_after_tool_calls_read_as_one(owner):
    session = SessionFactory(owner=owner)
    MessageFactory(session=session, role="user", content="Save it")
    MessageFactory(session=session, role="assistant", content="Saving.")
    MessageFactory(session=session, role="tool", tool_call_id="c1", content="{}")
    MessageFactory(session=session, role="assistant", content="")
    MessageFactory(session=session, role="assistant", content="Saved.")
    assert [(i.role, i.text) for i in conversation_items(session)] == [
        ("user", "Save it"),
        ("assistant", "Saving.\n\nSaved."),
    ]
    resent = plan(owner, ("user", "Save it"), ("assistant", "Saving.\n\nSaved. "), ("user", "ok"))
    assert resent == TurnPlan(session.pk, "ok")


def test_a_lone_first_message_or_another_persons_history_starts_anew(owner, outsider):
    mine = conversation_with(owner, "hello")
    fresh = plan(owner, ("user", "hello"))
    assert fresh.session_id != mine.pk
    theirs = plan(outsider, ("user", "hello"), ("assistant", "Answer 0."), ("user", "more"))
    created = Session.objects.get(pk=theirs.session_id)
    assert created.owner == outsider and created.source == API_SOURCE
    assert list(created.messages.order_by("id").values_list("role", "content")) == [
        ("user", "hello"),
        ("assistant", "Answer 0."),
    ]
    # Written as one path, answered by the next turn.
    assert list(created.messages.values_list("parent_id", flat=True).order_by("id"))[0] is None
    assert created.message_count == 2
    assert Message.objects.filter(session=mine).count() == 2
