"""The conversation claim (sessions_app.turn_claim): one turn or one compression at a time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from sessions_app import turn_claim
from sessions_app.models import Session
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(owner: Any) -> Session:
    return SessionFactory(owner=owner, title="Claimed")


def claim_of(session: Session) -> str:
    return Session.objects.get(pk=session.pk).turn_token


def test_a_free_conversation_is_claimed_once(session: Session) -> None:
    token = turn_claim.acquire_for_turn(session_id=session.pk)
    assert token and claim_of(session) == token
    assert turn_claim.acquire_for_turn(session_id=session.pk) == ""
    assert not turn_claim.acquire_for_compression(session_id=session.pk)


def test_release_with_someone_elses_token_changes_nothing(session: Session) -> None:
    token = turn_claim.acquire_for_turn(session_id=session.pk)
    turn_claim.release(session_id=session.pk, token="not-mine")
    assert claim_of(session) == token
    turn_claim.release(session_id=session.pk, token=token)
    assert claim_of(session) == ""


def test_a_stale_claim_is_taken_over_by_the_next_turn(session: Session) -> None:
    assert turn_claim.acquire_for_compression(session_id=session.pk)
    assert turn_claim.is_compressing(session_id=session.pk)
    assert turn_claim.acquire_for_turn(session_id=session.pk) == ""
    long_ago = timezone.now() - timedelta(seconds=settings.HERMES_TURN_STALE_SECONDS + 1)
    Session.objects.filter(pk=session.pk).update(turn_started_at=long_ago)
    token = turn_claim.acquire_for_turn(session_id=session.pk)
    assert token and not turn_claim.is_compressing(session_id=session.pk)


def test_an_ended_conversation_is_not_compressed(session: Session) -> None:
    Session.objects.filter(pk=session.pk).update(ended_at=timezone.now())
    assert not turn_claim.acquire_for_compression(session_id=session.pk)
