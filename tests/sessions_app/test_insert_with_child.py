"""A person's message and the answer that replies to it, written together
(core.db.insert.insert_with_child): one INSERT on PostgreSQL, two saves elsewhere; the rows
must be what two saves write, the answer after its parent in id order (the path's order)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.db.insert import insert_with_child
from sessions_app.models import Message, Session

pytestmark = pytest.mark.django_db


def pair(session, now):
    asked = Message(session=session, role="user", content="Deploy it ✓ 100%", timestamp=now)
    answer = Message(
        session=session,
        role="assistant",
        status="streaming",
        model="gpt-test",
        timestamp=now,
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "x"}}],
    )
    return asked, answer


def stored(message):
    row = model_to_dict(Message.objects.get(pk=message.pk))
    return {k: v for k, v in row.items() if k not in ("id", "parent")}


def test_the_two_rows_are_what_two_saves_write(owner):
    session = Session.objects.create(owner=owner, title="t")
    earlier = Message.objects.create(session=session, role="assistant", content="Earlier.")
    now = timezone.now()
    asked, answer = pair(session, now)
    asked.parent = earlier  # the message continues the path
    with CaptureQueriesContext(connection) as queries:
        insert_with_child(asked, answer, link="parent")
    assert len(queries) == (1 if connection.vendor == "postgresql" else 2)
    saved_asked, saved_answer = pair(session, now)
    saved_asked.save()
    saved_answer.parent = saved_asked
    saved_answer.save()

    assert stored(asked) == stored(saved_asked)
    assert stored(answer) == stored(saved_answer)
    assert Message.objects.get(pk=answer.pk).parent_id == asked.pk
    assert Message.objects.get(pk=asked.pk).parent_id == earlier.pk
    assert answer.parent_id == asked.pk and answer.parent is asked
    assert not asked._state.adding and not answer._state.adding
    answer.content = "Done."
    answer.save(update_fields=["content"])  # an UPDATE of a saved row, as after save()
    assert Message.objects.get(pk=answer.pk).content == "Done."


def test_each_answer_comes_after_its_message_in_id_order(owner):
    session = Session.objects.create(owner=owner, title="t")
    ids = []
    for _ in range(25):
        asked, answer = pair(session, timezone.now())
        insert_with_child(asked, answer, link="parent")
        ids += [asked.pk, answer.pk]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert (
        list(Message.objects.filter(session=session).order_by("id").values_list("id", flat=True))
        == ids
    )
