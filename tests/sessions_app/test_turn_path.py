"""The path a turn's claim reads once (for the new message's parent and the first model
call) must be exactly what a read after the commit gives: the provider's prefix cache
hits only on the same bytes, and the model must see what the chat shows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sessions_app.agent.prepare import turn_open, turn_warm
from sessions_app.models import Message, Session
from sessions_app.selectors import api_messages
from tests.chat.test_models import add_entry, second  # noqa: F401 - the second model's server

pytestmark = pytest.mark.django_db(transaction=True)

CALLS = [
    {"id": "c1", "type": "function", "function": {"name": "memory", "arguments": '{"a": "é"}'}},
    {"id": "c2", "type": "function", "function": {"name": "memory", "arguments": "{}"}},
]


def conversation(owner, *, release=True):
    """A first turn that called two tools (one answered), then a recalled-for message and
    its measured answer."""
    first = turn_open(user=owner, session_id=None, text="Hello")
    sid = first.session.pk
    called = first.assistant_message
    Message.objects.filter(pk=called.pk).update(status="complete", tool_calls=CALLS)

    def add(**fields):
        return Message.objects.create(session_id=sid, **fields)

    result = add(role="tool", tool_call_id="c1", content="ok", parent_id=called.pk)
    done = add(role="assistant", content="Done ☃", status="complete", parent_id=result.pk)
    asked = add(
        role="user",
        content="More",
        context_block="<memory-context>likes tea</memory-context>",
        parent_id=done.pk,
    )
    tip = add(
        role="assistant",
        content="Yes.",
        status="complete",
        prompt_tokens=50,
        completion_tokens=5,
        parent_id=asked.pk,
    )
    if release:
        first.lease.release()
    return sid, tip


def fresh(start):
    return api_messages(session_id=start.session.pk, system_prompt=start.facts.prompt)


def test_the_first_call_is_sent_what_a_read_after_the_commit_gives(owner, scripted):
    sid, tip = conversation(owner)
    start = turn_open(user=owner, session_id=sid, text="Next")
    assert start.facts.messages == fresh(start)
    assert start.facts.messages[1:] == [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": None, "tool_calls": CALLS[:1]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "Done ☃"},
        {"role": "user", "content": "More\n\n<memory-context>likes tea</memory-context>"},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": "Next"},
    ]
    assert start.user_message.parent_id == tip.pk
    assert start.assistant_message.parent_id == start.user_message.pk
    start.lease.release()


def test_an_answer_left_by_a_dead_holder_is_sent_as_it_was_saved(owner, scripted):
    sid, tip = conversation(owner, release=False)
    partial = Message.objects.create(
        session_id=sid,
        role="assistant",
        content="Half an ans",
        status="streaming",
        parent_id=tip.pk,
    )
    Session.objects.filter(pk=sid).update(lease_expires_at=timezone.now() - timedelta(seconds=5))
    start = turn_open(user=owner, session_id=sid, text="Go on")
    assert start.lease.took_over
    assert start.facts.messages == fresh(start)
    assert start.facts.messages[-2:] == [
        {"role": "assistant", "content": "Half an ans"},
        {"role": "user", "content": "Go on"},
    ]
    assert Message.objects.get(pk=partial.pk).status == Message.Status.INTERRUPTED
    assert start.user_message.parent_id == partial.pk
    start.lease.release()


def test_a_model_switch_marker_is_the_new_messages_parent(owner, scripted, second):  # noqa: F811
    entry = add_entry(second)
    sid, _tip = conversation(owner)
    start = turn_open(user=owner, session_id=sid, text="Next", model=str(entry.pk))
    marker = Message.objects.get(session_id=sid, kind=Message.Kind.MODEL_SWITCH)
    assert start.user_message.parent_id == marker.pk
    # The switch clears the frozen prompt: the claim froze one for the new model.
    assert "context window: 9,000 tokens" in start.facts.prompt
    assert start.facts.messages[1:] == fresh(start)[1:]
    start.lease.release()
    # The warm-up between turns makes the reads the next claim makes, the model's too.
    with CaptureQueriesContext(connection) as warm:
        turn_warm(user=owner, session_id=sid)
    assert any("model_catalog_modelentry" in q["sql"] for q in warm.captured_queries)
