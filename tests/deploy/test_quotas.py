"""Per-person daily quotas: messages sent and tokens used, checked when a turn starts."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Membership, Profile
from accounts.selectors import Quota, day_bounds
from accounts.services import profile_get, quota_check, turn_account
from core.exceptions import NotFound, ServiceError
from sessions_app import selectors
from sessions_app.models import Message, Session
from tests.chat.conftest import events_until, settle


def add_usage(user, *, messages: int = 0, tokens: int = 0, when=None):
    when = when or timezone.now()
    session = Session.objects.create(owner=user, title=f"usage {when.isoformat()}")
    for _ in range(messages):
        Message.objects.create(session=session, role="user", content="hi", timestamp=when)
    if tokens:
        Message.objects.create(
            session=session,
            role="assistant",
            status="complete",
            content="answer",
            prompt_tokens=tokens // 2,
            completion_tokens=tokens - tokens // 2,
            timestamp=when,
        )
    return session


@pytest.mark.django_db
def test_no_limits_by_default(owner, settings):
    settings.HERMES_DAILY_MESSAGE_LIMIT = 0
    settings.HERMES_DAILY_TOKEN_LIMIT = 0
    add_usage(owner, messages=500, tokens=10**7)
    quota_check(user=owner)  # does not raise


@pytest.mark.django_db
def test_the_message_quota_says_the_limit_and_when_it_resets(owner, settings):
    settings.HERMES_DAILY_MESSAGE_LIMIT = 3
    add_usage(owner, messages=2)
    quota_check(user=owner)
    add_usage(owner, messages=1)
    with pytest.raises(ServiceError) as refused:
        quota_check(user=owner)
    error = refused.value
    assert error.code == "quota_exceeded"
    assert error.status_code == 429
    assert "daily limit is 3" in error.message
    reset = timezone.localtime(day_bounds()[1])
    assert f"resets at {reset:%H:%M}" in error.message
    assert error.details["resets_at"] == day_bounds()[1].isoformat()


@pytest.mark.django_db
def test_the_token_quota_counts_prompt_and_completion_of_todays_answers(owner, settings):
    settings.HERMES_DAILY_TOKEN_LIMIT = 1000
    add_usage(owner, tokens=5000, when=day_bounds()[0] - timedelta(minutes=1))  # yesterday
    add_usage(owner, tokens=999)
    quota_check(user=owner)
    add_usage(owner, tokens=2)
    with pytest.raises(ServiceError) as refused:
        quota_check(user=owner)
    assert "1,001 tokens today" in refused.value.message
    assert "limit is 1,000 tokens" in refused.value.message


@pytest.mark.django_db
def test_a_personal_limit_beats_the_team_default_and_zero_means_none(owner, outsider, settings):
    settings.HERMES_DAILY_MESSAGE_LIMIT = 2
    add_usage(owner, messages=5)
    add_usage(outsider, messages=5)
    Membership.objects.create(user=owner, daily_message_limit=0)
    Membership.objects.create(user=outsider, daily_message_limit=10)
    quota_check(user=owner)
    quota_check(user=outsider)
    Membership.objects.filter(user=outsider).update(daily_message_limit=5)
    with pytest.raises(ServiceError):
        quota_check(user=outsider)


@pytest.fixture
def two_accounts(owner, outsider, settings):
    """The team's limits (2 messages, 9,000 tokens); the outsider's own (10, none) and an
    identity of their own; both have the profile made when they signed up."""
    settings.HERMES_DAILY_MESSAGE_LIMIT = 2
    settings.HERMES_DAILY_TOKEN_LIMIT = 9000
    Membership.objects.create(user=outsider, daily_message_limit=10, daily_token_limit=0)
    for person in (owner, outsider):
        profile_get(user=person)  # made when they signed up
    Profile.objects.filter(user=outsider).update(identity="You are the outsider's agent.")


@pytest.mark.django_db
def test_a_turn_reads_its_own_persons_limits_and_profile_in_one_statement(
    owner, outsider, two_accounts
):
    with CaptureQueriesContext(connection) as queries:
        quota, profile = turn_account(user=outsider)
    assert len(queries) == 1
    assert quota == Quota(messages=10, tokens=0)
    assert profile.user_id == outsider.pk and profile.identity == "You are the outsider's agent."
    # No membership of their own: the team's limits; no profile yet: made now.
    Profile.objects.filter(user=owner).delete()
    quota, profile = turn_account(user=owner)
    assert quota == Quota(messages=2, tokens=9000)
    assert profile.user_id == owner.pk and Profile.objects.filter(user=owner).exists()


@pytest.mark.django_db
def test_a_later_turn_reads_its_own_persons_limits_and_profile_with_the_conversation(
    owner, outsider, two_accounts
):
    theirs = Session.objects.create(owner=outsider, title="Theirs")
    with CaptureQueriesContext(connection) as queries:
        session, quota, profile = selectors.turn_session_read(user=outsider, session_id=theirs.pk)
    assert len(queries) == 1
    assert session.pk == theirs.pk and quota == Quota(messages=10, tokens=0)
    assert profile.user_id == outsider.pk and profile.identity == "You are the outsider's agent."
    # Someone else's conversation is not found, whoever's account would come with it.
    with pytest.raises(NotFound):
        selectors.turn_session_read(user=owner, session_id=theirs.pk)
    # No membership of their own: the team's limits; no profile yet: made now.
    Profile.objects.filter(user=owner).delete()
    mine = Session.objects.create(owner=owner, title="Mine")
    _session, quota, profile = selectors.turn_session_read(user=owner, session_id=mine.pk)
    assert quota == Quota(messages=2, tokens=9000)
    assert profile.user_id == owner.pk and Profile.objects.filter(user=owner).exists()


@pytest.mark.django_db
def test_other_peoples_usage_does_not_count(owner, outsider, settings):
    settings.HERMES_DAILY_MESSAGE_LIMIT = 3
    add_usage(outsider, messages=10)
    quota_check(user=owner)


@pytest.mark.django_db(transaction=True)
def test_a_chat_message_over_the_quota_is_refused_over_the_socket(
    owner, scripted, sockets, settings
):
    settings.HERMES_DAILY_MESSAGE_LIMIT = 1
    scripted.enqueue(reply="First answer.")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "one"})
        first = await events_until(ws, "assistant.done")
        session = first[0]["session"]
        await ws.send_json_to({"type": "chat.send", "session": session, "text": "two"})
        refused = await ws.receive_json_from(timeout=10)
        await ws.disconnect()
        await settle()
        return session, refused

    session_id, refused = asyncio.run(scenario())
    assert refused["type"] == "error"
    assert refused["code"] == "quota_exceeded"
    assert "daily limit is 1" in refused["message"]
    # The refused message was not saved and no model call was made for it.
    texts = list(Session.objects.get(pk=session_id).messages.values_list("content", flat=True))
    assert texts == ["one", "First answer."]
    assert len(scripted.requests) == 1
