"""The branch tree's services and selectors on the real database (SQLite or PostgreSQL):
edits and regenerations make alternatives, a switch brings back a branch's most recent
continuation, only the selected path reaches the model, and the migration turns existing
conversations into one path (and reverses)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core.exceptions import NotFound, ServiceError
from sessions_app import answers, services
from sessions_app.branches import alternatives_of
from sessions_app.models import Message, Session
from sessions_app.search.service import search_conversations
from sessions_app.selectors import api_messages
from tests.factories import conversation_with

pytestmark = pytest.mark.django_db


def path(session: Session) -> list[str]:
    return list(
        session.messages.filter(active=True).order_by("id").values_list("content", flat=True)
    )


def answer(start: services.TurnStart, text: str) -> None:
    """Finish the turn as the runner would."""
    answers.assistant_finish(
        message_id=start.assistant_message.pk, content=text, status="complete", usage=None
    )
    start.lease.release()


def edit(user, session: Session, message: Message, text: str) -> services.TurnStart:
    return services.turn_begin(user=user, session_id=session.pk, text=text, message_id=message.pk)


def test_an_edit_is_an_alternative_and_the_path_goes_on_from_it(owner):
    session = conversation_with(owner, "one", "two")
    one = session.messages.get(content="one")
    count = Session.objects.get(pk=session.pk).message_count
    start = edit(owner, session, one, "uno")
    answer(start, "Answer uno.")
    assert path(session) == ["uno", "Answer uno."]
    assert start.user_message.parent_id is None
    alternatives = alternatives_of([session.pk])
    assert (alternatives[one.pk].index, alternatives[one.pk].count) == (1, 2)
    new = alternatives[start.user_message.pk]
    assert (new.index, new.count, new.previous, new.next) == (2, 2, one.pk, None)
    # Counters count every stored message (the two new ones added, nothing taken away).
    assert Session.objects.get(pk=session.pk).message_count == count + 2
    assert [m["content"] for m in api_messages(session_id=session.pk, system_prompt="S")] == [
        "S",
        "uno",
        "Answer uno.",
    ]


def test_switching_back_brings_the_branch_with_its_most_recent_continuation(owner):
    session = conversation_with(owner, "one", "two")
    one, two = session.messages.get(content="one"), session.messages.get(content="two")
    # On the original branch, the second answer is regenerated: its newest continuation.
    answer(
        services.turn_begin(
            user=owner, session_id=session.pk, text=None, regenerate=True, message_id=None
        ),
        "Answer 1, again.",
    )
    answer(edit(owner, session, one, "uno"), "Answer uno.")
    assert services.branch_select(user=owner, session_id=session.pk, message_id=one.pk)
    assert path(session) == ["one", "Answer 0.", "two", "Answer 1, again."]
    assert two.pk in [m.pk for m in session.messages.filter(active=True)]
    # The regenerated answer's older alternative is one click away, and stays selected.
    older = session.messages.get(content="Answer 1.")
    services.branch_select(user=owner, session_id=session.pk, message_id=older.pk)
    assert path(session) == ["one", "Answer 0.", "two", "Answer 1."]
    uno = session.messages.get(content="uno")
    services.branch_select(user=owner, session_id=session.pk, message_id=uno.pk)
    assert path(session) == ["uno", "Answer uno."]
    # Selecting the selected one changes nothing.
    assert services.branch_select(user=owner, session_id=session.pk, message_id=uno.pk) == [uno.pk]
    assert Session.objects.get(pk=session.pk).lease_owner == ""


def test_a_new_message_continues_the_selected_path(owner):
    session = conversation_with(owner, "one")
    one = session.messages.get(content="one")
    answer(edit(owner, session, one, "uno"), "Answer uno.")
    services.branch_select(user=owner, session_id=session.pk, message_id=one.pk)
    start = services.turn_begin(user=owner, session_id=session.pk, text="next")
    assert start.user_message.parent_id == session.messages.get(content="Answer 0.").pk
    answer(start, "Answer next.")
    assert path(session) == ["one", "Answer 0.", "next", "Answer next."]


def test_regenerating_an_earlier_answer_drops_what_followed_from_the_path(owner):
    session = conversation_with(owner, "one", "two")
    first_answer = session.messages.get(content="Answer 0.")
    start = services.turn_begin(
        user=owner, session_id=session.pk, text=None, regenerate=True, message_id=first_answer.pk
    )
    answer(start, "Answer 0, again.")
    assert path(session) == ["one", "Answer 0, again."]
    assert start.assistant_message.parent_id == session.messages.get(content="one").pk


def test_refusals(owner, outsider):
    session = conversation_with(owner, "one")
    one = session.messages.get(content="one")
    theirs = conversation_with(outsider, "secret").messages.get(content="secret")
    with pytest.raises(NotFound):
        edit(owner, session, theirs, "x")
    with pytest.raises(NotFound):
        services.branch_select(user=owner, session_id=session.pk, message_id=theirs.pk)
    with pytest.raises(ServiceError) as refused:
        edit(owner, session, session.messages.get(content="Answer 0."), "x")
    assert refused.value.code == "not_editable"
    # A compressed (ended) part is history.
    Session.objects.filter(pk=session.pk).update(ended_at=session.started_at)
    with pytest.raises(ServiceError) as ended:
        edit(owner, session, one, "x")
    assert ended.value.code == "not_editable"
    assert Session.objects.get(pk=session.pk).lease_owner == ""
    assert path(session) == ["one", "Answer 0."]


def test_a_message_on_another_branch_cannot_be_edited_until_selected(owner):
    session = conversation_with(owner, "one")
    one = session.messages.get(content="one")
    answer(edit(owner, session, one, "uno"), "Answer uno.")
    with pytest.raises(ServiceError) as refused:
        edit(owner, session, one, "again")
    assert refused.value.code == "not_on_path"
    assert Session.objects.get(pk=session.pk).lease_owner == ""


def test_every_branch_is_searchable_and_says_which_is_selected(owner):
    session = conversation_with(owner, "zanzibar holiday")
    original = session.messages.get(content="zanzibar holiday")
    answer(edit(owner, session, original, "zanzibar weekend"), "Sure.")
    result = search_conversations(owner=owner, query="zanzibar")
    hits = {h.message_id: h.on_path for c in result.conversations for h in c.hits}
    new = session.messages.get(content="zanzibar weekend")
    assert hits == {original.pk: False, new.pk: True}


@pytest.mark.django_db(transaction=True)
def test_migration_links_existing_messages_into_one_path_and_reverses(owner):
    executor = MigrationExecutor(connection)
    before, after = (
        [("sessions_app", "0007_session_model_switch_marker")],
        [("sessions_app", "0008_message_branches")],
    )
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    OldSession, OldMessage = (
        old.get_model("sessions_app", "Session"),
        old.get_model("sessions_app", "Message"),
    )
    sessions = [OldSession.objects.create(owner_id=owner.pk, title=t) for t in ("a", "b")]
    ids = {}
    for s in sessions:  # interleaved, as two conversations written at the same time
        ids.setdefault(s.pk, [])
    for i in range(3):
        for s in sessions:
            ids[s.pk].append(OldMessage.objects.create(session=s, role="user", content=f"m{i}").pk)
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    for session_id, chain in ids.items():
        rows = dict(Message.objects.filter(session_id=session_id).values_list("id", "parent_id"))
        assert rows == {chain[0]: None, chain[1]: chain[0], chain[2]: chain[1]}
        assert Message.objects.filter(session_id=session_id, active=True).count() == 3
    # Back: rows on other branches cannot be told apart without the tree, so they go.
    Message.objects.filter(pk=ids[sessions[0].pk][2]).update(active=False)
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    assert OldMessage.objects.filter(session_id=sessions[0].pk).count() == 2
    assert OldMessage.objects.filter(session_id=sessions[1].pk).count() == 3
    call_command("migrate", verbosity=0)
