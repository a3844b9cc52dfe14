"""A compression that ends a conversation while a turn claims it. On PostgreSQL each
statement sees what is committed when it starts, so a split can commit between the claim's
read of the conversation and its writes: the message must go on in the continuation, never
into the ended part. Each test commits the split, then lets the claim read what it would
have read just before (`stale`)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from sessions_app import services, turn_claim
from sessions_app.agent.prepare import turn_open
from sessions_app.models import Message, Session
from tests.factories import MessageFactory, SessionFactory

pytestmark = pytest.mark.django_db(transaction=True)


def first_turn(owner) -> Session:
    first = turn_open(user=owner, session_id=None, text="Hello")
    Message.objects.filter(pk=first.assistant_message.pk).update(status="complete", content="Hi.")
    first.lease.release()
    return first.session


def split(owner, session: Session, *, compression=None) -> Session:
    """What a compression's split commits: the part ended and freed, its continuation."""
    now = timezone.now()
    ended = {"ended_at": now, "end_reason": Session.EndReason.COMPRESSION}
    if compression is not None:
        compression.release(**ended)
    else:
        Session.objects.filter(pk=session.pk).update(**ended, lease_owner="")
    child = SessionFactory(owner=owner, parent=session, started_at=now)
    MessageFactory(session=child, role="user", kind="summary", content="Summary: hello.")
    return child


def stale(monkeypatch, module, name: str, answer) -> None:
    """The next call of `module.name` answers `answer`, as it would have before the split."""
    real = getattr(module, name)

    def once(**kwargs):
        monkeypatch.setattr(module, name, real)
        return answer

    monkeypatch.setattr(module, name, once)


def test_a_message_sent_as_the_conversation_is_split_goes_on_in_the_continuation(
    owner, scripted, monkeypatch
):
    ended = first_turn(owner)
    before = services.turn_session_read(user=owner, session_id=ended.pk)
    child = split(owner, ended)
    stale(monkeypatch, services, "turn_session_read", before)
    start = turn_open(user=owner, session_id=ended.pk, text="And then?")
    assert start.lease is not None and start.session.pk == child.pk
    assert start.switched_from == ended.pk  # the tab is told where the chat went on
    assert start.user_message.session_id == child.pk
    assert start.assistant_message.session_id == child.pk
    assert not Message.objects.filter(session=ended, content="And then?").exists()
    # The model is sent the continuation (its summary, then the message), not the ended part.
    assert [m["content"] for m in start.facts.messages[1:]] == ["Summary: hello.", "And then?"]
    assert Session.objects.get(pk=ended.pk).lease_owner == ""
    # The counters moved where the messages went.
    assert Session.objects.get(pk=ended.pk).message_count == 2
    assert Session.objects.get(pk=child.pk).message_count == 2
    start.lease.release()


def test_a_message_saved_to_wait_as_the_compression_splits_goes_on_in_the_continuation(
    owner, scripted, monkeypatch
):
    """The claim saw the compression holding the conversation (so the message was to be
    saved and wait for it); the split commits before the message is written."""
    ended = first_turn(owner)
    before = services.turn_session_read(user=owner, session_id=ended.pk)
    child = split(owner, ended, compression=turn_claim.acquire_for_compression(session_id=ended.pk))
    stale(monkeypatch, services, "turn_session_read", before)
    stale(monkeypatch, turn_claim, "refusal_kind", turn_claim.COMPRESS)
    start = turn_open(user=owner, session_id=ended.pk, text="While you compress")
    # Not left behind in the ended part, where the wait for the compression would never
    # find it: claimed again, the message is answered in the continuation at once.
    assert start.lease is not None and start.session.pk == child.pk
    assert start.user_message.session_id == child.pk
    assert not Message.objects.filter(session=ended, content="While you compress").exists()
    assert Session.objects.get(pk=ended.pk).message_count == 2
    start.lease.release()


def test_an_edit_sent_as_the_conversation_is_split_is_refused_as_closed(
    owner, scripted, monkeypatch
):
    ended = first_turn(owner)
    asked = Message.objects.get(session=ended, role="user")
    before = services.turn_session_read(user=owner, session_id=ended.pk)
    split(owner, ended)
    stale(monkeypatch, services, "turn_session_read", before)
    with pytest.raises(services.ServiceError) as refused:
        turn_open(user=owner, session_id=ended.pk, text="Hello again", message_id=asked.pk)
    assert refused.value.code == "not_editable"
    assert not Message.objects.filter(content="Hello again").exists()
    assert Session.objects.get(pk=ended.pk).lease_owner == ""


def test_the_ended_part_is_not_leased_for_a_branch_change(owner, scripted, monkeypatch):
    ended = first_turn(owner)
    asked = Message.objects.get(session=ended, role="user")
    other = MessageFactory(
        session=ended, role="assistant", content="Another answer.", parent=asked, active=False
    )
    before = services.access_session(user=owner, session_id=ended.pk)
    split(owner, ended)
    stale(monkeypatch, services, "access_session", before)
    with pytest.raises(services.ServiceError) as refused:
        services.branch_select(user=owner, session_id=ended.pk, message_id=other.pk)
    assert refused.value.code == "not_editable"
    assert not Message.objects.get(pk=other.pk).active  # the ended part is as it was
    assert Session.objects.get(pk=ended.pk).lease_owner == ""


def test_a_chain_with_no_open_part_refuses_the_message_as_ended(owner, scripted, monkeypatch):
    """Every read finds the part open and every write finds it ended (a continuation the
    claim cannot reach): refused with what happened, nothing written."""
    ended = first_turn(owner)
    before = services.turn_session_read(user=owner, session_id=ended.pk)
    split(owner, ended)
    monkeypatch.setattr(services, "turn_session_read", lambda **kwargs: before)
    with pytest.raises(services.ServiceError) as refused:
        turn_open(user=owner, session_id=ended.pk, text="Anyone?")
    assert refused.value.code == "session_ended"
    assert not Message.objects.filter(content="Anyone?").exists()
