"""The end of a turn with a final answer, on the real database: one trip to the database
thread saves the answer and frees the conversation in the same transaction as its
counters; after `assistant.done` the after-turn checks decide on compression from the
answer's own usage (no query) and count the review."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import answers, services
from sessions_app.agent.llm.cost import CallUsage
from sessions_app.agent.runner import _after_turn_checks
from sessions_app.models import Message, Session
from skills_app.models import SessionSkillState
from skills_app.services.review import review_after_turn
from tests.factories import conversation_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_window(settings):
    settings.HERMES_CONTEXT_LENGTH = 2400
    settings.HERMES_REPLY_MAX_TOKENS = 200
    settings.HERMES_COMPRESSION_THRESHOLD = 0.75  # 1,650 tokens


def begun(owner):
    session = conversation_with(owner, "first question")
    return services.turn_begin(user=owner, session_id=session.pk, text="second question")


def finish(start, *, prompt=900, completion=100, **extra):
    answers.assistant_finish(
        message_id=start.assistant_message.pk,
        content="The answer.",
        status="complete",
        usage=CallUsage("scripted", prompt_tokens=prompt, completion_tokens=completion),
        finish_reason="stop",
        **extra,
    )


def checks(start, owner, *, next_prompt, jobs=()):
    _after_turn_checks(
        session=start.session,
        next_prompt=next_prompt,
        window=2400,
        tool_iterations=0,
        jobs=list(jobs),
        user=owner,
    )


def selects(queries) -> list[str]:
    return [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("SELECT")]


def test_the_answer_is_saved_and_the_conversation_freed_with_its_counters(owner):
    start = begun(owner)
    before = Session.objects.get(pk=start.session.pk)
    with CaptureQueriesContext(connection) as queries:
        finish(start, lease=start.lease)
    answer = Message.objects.get(pk=start.assistant_message.pk)
    assert (answer.status, answer.content, answer.prompt_tokens) == ("complete", "The answer.", 900)
    session = Session.objects.get(pk=start.session.pk)
    assert session.lease_owner == "" and session.lease_expires_at is None
    assert session.input_tokens == before.input_tokens + 900
    assert session.output_tokens == before.output_tokens + 100
    assert selects(queries.captured_queries) == []
    # The next turn finds the conversation free.
    services.turn_begin(user=owner, session_id=session.pk, text="third").lease.release()


def test_a_lease_lost_meanwhile_stays_its_holders_and_the_counters_are_kept(owner):
    start = begun(owner)
    Session.objects.filter(pk=start.session.pk).update(lease_owner="turn@elsewhere#1")
    before = Session.objects.get(pk=start.session.pk)
    finish(start, lease=start.lease)
    session = Session.objects.get(pk=start.session.pk)
    assert session.lease_owner == "turn@elsewhere#1"
    assert session.input_tokens == before.input_tokens + 900


def test_a_closed_answer_is_not_reopened_by_a_late_interruption(owner):
    # The turn was cancelled while its close was on the database thread: the close saved
    # the answer, then the turn's own cleanup tries to mark it interrupted.
    start = begun(owner)
    finish(start, lease=start.lease)
    answers.assistant_finish(
        message_id=start.assistant_message.pk,
        content="The ans",
        status="interrupted",
        usage=None,
        finish_reason="stopped",
        streaming_only=True,
    )
    answer = Message.objects.get(pk=start.assistant_message.pk)
    assert (answer.status, answer.content, answer.finish_reason) == (
        "complete",
        "The answer.",
        "stop",
    )


@pytest.mark.parametrize(("prompt", "compresses"), [(1500, False), (1600, True)])
def test_the_compression_is_queued_from_the_answers_usage_without_a_query(
    owner, small_window, django_capture_on_commit_callbacks, prompt, compresses
):
    start = begun(owner)
    finish(start, prompt=prompt, completion=50, lease=start.lease)  # 1,550 or 1,650 of 1,650
    with CaptureQueriesContext(connection) as queries:
        with django_capture_on_commit_callbacks() as queued:
            checks(start, owner, next_prompt=prompt + 50)
    assert len(queued) == (1 if compresses else 0)
    assert selects(queries.captured_queries) == []


def test_the_review_counts_the_turn_without_reading_the_memory_switch_again(owner, settings):
    settings.HERMES_REVIEW_ENABLED = True
    start = begun(owner)
    finish(start, lease=start.lease)
    SessionSkillState.objects.get_or_create(session_id=start.session.pk)
    with CaptureQueriesContext(connection) as queries:
        checks(start, owner, next_prompt=1000, jobs=[("skill_review", review_after_turn)])
    state = SessionSkillState.objects.get(session_id=start.session.pk)
    assert state.turns_since_memory_review == 1
    # The counters' read after their UPDATE, and nothing else.
    reads = selects(queries.captured_queries)
    assert len(reads) == 1 and "skillstate" in reads[0].lower()


def test_the_review_of_a_conversation_deleted_meanwhile_counts_nothing(owner, settings):
    settings.HERMES_REVIEW_ENABLED = True
    start = begun(owner)
    finish(start, lease=start.lease)
    session_id = start.session.pk
    Session.objects.filter(pk=session_id).delete()
    review_after_turn(session_id=session_id, tool_iterations=3, memory_enabled=True)
    assert not SessionSkillState.objects.filter(session_id=session_id).exists()
