"""A compression that ends a conversation between a turn's read of it and the turn's lease
(PostgreSQL's statements each see what is committed when they start, so a split can
commit in between): the message goes on in the continuation, never into the ended part."""

from __future__ import annotations

import pytest
from django.utils import timezone

from sessions_app import services
from sessions_app.agent.prepare import turn_open
from sessions_app.models import Message, Session
from tests.factories import MessageFactory, SessionFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def split_after_read(owner, monkeypatch):
    """Makes the next read of a conversation be followed at once by its split (the ended
    part freed, a continuation opened): what a compression committing at that moment
    leaves. Gives the continuation."""
    read = services.access_session
    made: dict[str, Session] = {}

    def read_then_split(**kwargs):
        session = read(**kwargs)
        if not made:
            now = timezone.now()
            Session.objects.filter(pk=session.pk).update(
                ended_at=now,
                end_reason=Session.EndReason.COMPRESSION,
                lease_owner="",
                lease_expires_at=None,
            )
            made["child"] = child = SessionFactory(owner=owner, parent=session, started_at=now)
            MessageFactory(session=child, role="user", kind="summary", content="Summary: hello.")
        return session

    monkeypatch.setattr(services, "access_session", read_then_split)
    return made


def first_turn(owner):
    first = turn_open(user=owner, session_id=None, text="Hello")
    Message.objects.filter(pk=first.assistant_message.pk).update(status="complete", content="Hi.")
    first.lease.release()
    return first.session


def test_a_message_sent_as_the_conversation_is_split_goes_on_in_the_continuation(
    owner, scripted, split_after_read
):
    ended = first_turn(owner)
    start = turn_open(user=owner, session_id=ended.pk, text="And then?")
    child = split_after_read["child"]
    assert start.lease is not None and start.session.pk == child.pk
    assert start.switched_from == ended.pk  # the tab is told where the chat went on
    assert start.user_message.session_id == child.pk
    assert start.assistant_message.session_id == child.pk
    assert not Message.objects.filter(session=ended, content="And then?").exists()
    # The model is sent the continuation (its summary, then the message), not the ended part.
    assert [m["content"] for m in start.facts.messages[1:]] == ["Summary: hello.", "And then?"]
    assert Session.objects.get(pk=ended.pk).lease_owner == ""
    start.lease.release()


def test_the_ended_part_is_not_leased_for_a_branch_change(owner, scripted, split_after_read):
    ended = first_turn(owner)
    asked = Message.objects.get(session=ended, role="user")
    other = MessageFactory(
        session=ended, role="assistant", content="Another answer.", parent=asked, active=False
    )
    with pytest.raises(services.ServiceError) as refused:
        services.branch_select(user=owner, session_id=ended.pk, message_id=other.pk)
    assert refused.value.code == "not_editable"
    assert not Message.objects.get(pk=other.pk).active  # the ended part is as it was
    assert Session.objects.get(pk=ended.pk).lease_owner == ""


def test_an_edit_sent_as_the_conversation_is_split_is_refused_as_closed(
    owner, scripted, split_after_read
):
    ended = first_turn(owner)
    asked = Message.objects.get(session=ended, role="user")
    with pytest.raises(services.ServiceError) as refused:
        turn_open(user=owner, session_id=ended.pk, text="Hello again", message_id=asked.pk)
    assert refused.value.code == "not_editable"
    assert not Message.objects.filter(content="Hello again").exists()
    assert Session.objects.get(pk=ended.pk).lease_owner == ""
