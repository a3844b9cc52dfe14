"""The turn's preflight on the real database: a message that alone takes the conversation past
the compression threshold is saved and the conversation compressed before any model call;
one just under it is answered. The estimate for the new message, before or after it is
written, agrees with the one the database gives."""

from __future__ import annotations

import pytest

from sessions_app import services
from sessions_app.models import Message, Session
from sessions_app.thresholds import estimated_next_prompt, threshold_tokens
from tests.factories import conversation_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_window(settings):
    settings.HERMES_CONTEXT_LENGTH = 2400
    settings.HERMES_REPLY_MAX_TOKENS = 200
    settings.HERMES_COMPRESSION_THRESHOLD = 0.75


def measured_conversation(owner) -> Session:
    """Two exchanges; the last answer's call sent 1,200 tokens and got 300 back."""
    session = conversation_with(owner, "first question", "second question")
    last = session.messages.filter(role=Message.Role.ASSISTANT).order_by("-id").first()
    Message.objects.filter(pk=last.pk).update(prompt_tokens=1200, completion_tokens=300)
    return session


def test_threshold_of_the_small_window(owner, small_window):
    assert threshold_tokens(measured_conversation(owner)) == 1650


@pytest.mark.parametrize(("chars", "compresses"), [(500, False), (600, True)])
def test_a_message_that_passes_the_threshold_compresses_first(
    owner, small_window, django_capture_on_commit_callbacks, chars, compresses
):
    # 1,200 + 300 measured, plus chars/4 + 10 for the new message: 1,635 or 1,660 of 1,650.
    session = measured_conversation(owner)
    with django_capture_on_commit_callbacks() as queued:
        start = services.turn_begin(user=owner, session_id=session.pk, text="x" * chars)
    assert start.user_message is not None
    assert Message.objects.filter(pk=start.user_message.pk, content="x" * chars).exists()
    if compresses:
        assert start.lease is None and start.assistant_message is None
        assert len(queued) == 1  # the compression task, sent on commit
    else:
        assert start.lease is not None and start.assistant_message is not None
        assert queued == []
        start.lease.release()


@pytest.mark.parametrize(("measured_tip", "tokens"), [(True, 1560), (False, 1598)])
def test_the_estimate_for_the_new_message_matches_the_database(
    owner, django_assert_num_queries, measured_tip, tokens
):
    session = measured_conversation(owner)
    if not measured_tip:
        # An answer without usage after the measured one: the query path.
        Message.objects.create(session=session, role=Message.Role.USER, content="third " * 9)
        Message.objects.create(session=session, role=Message.Role.ASSISTANT, content="Ok " * 7)
    tip = session.messages.filter(active=True).order_by("-id").first()
    # The turn asks before writing the message (it goes in with the answer).
    unsaved = Message(session=session, role=Message.Role.USER, content="next " * 40, parent=tip)
    with django_assert_num_queries(0 if measured_tip else 1):
        before_written = estimated_next_prompt(session, after=unsaved)
    unsaved.save()
    # 1,500 measured + chars/4 + 10 for each message after the measured answer.
    assert estimated_next_prompt(session) == before_written == tokens
    with django_assert_num_queries(0 if measured_tip else 1):
        assert estimated_next_prompt(session, after=unsaved) == tokens
