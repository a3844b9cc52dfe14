"""What a turn costs the database thread, counted on the real database: every statement is a
round trip on which a busy process also waits for the interpreter lock, so the counts are
part of the turn's contract (see docs/capacity.md)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.services import profile_get
from model_catalog.models import ModelEntry
from sessions_app.agent.prepare import turn_open
from sessions_app.agent.prompt import session_freeze_prompt, turn_facts
from sessions_app.models import Message, Session
from sessions_app.selectors import api_messages
from tests.chat.test_models import add_entry, second  # noqa: F401 - the second model's server

pytestmark = pytest.mark.django_db(transaction=True)

CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")
# The person's message and the answer's placeholder: one INSERT on PostgreSQL, two in SQLite.
ONE_INSERT = int(connection.vendor == "postgresql")


def counted(queries) -> tuple[int, int]:
    """(statements that do work, transactions begun)."""
    sqls = [q["sql"].lstrip().upper() for q in queries.captured_queries]
    work = [s for s in sqls if not s.startswith(CONTROL)]
    return len(work), sum(s.startswith("BEGIN") for s in sqls)


def test_a_new_conversations_prompt_is_frozen_in_one_transaction(owner, scripted):
    start = turn_open(user=owner, session_id=None, text="Plan the staging deploy")
    with CaptureQueriesContext(connection) as queries:
        session_freeze_prompt(session=start.session, provider_block="")
    # The profile (read once for every section), the memory entries, the snapshot's
    # record, the skills, the skills index's record, the prompt and the conversation's link
    # to it.
    assert counted(queries) == (7, 1)
    start.lease.release()


def test_with_only_the_built_in_memory_the_claim_freezes_the_prompt_too(owner, scripted):
    profile_get(user=owner)  # made when the person signed up
    with CaptureQueriesContext(connection) as queries:
        start = turn_open(user=owner, session_id=None, text="Plan the staging deploy")
    assert start.facts.prompt and start.facts.prompt == start.session.system_prompt.prompt
    # The quota with the profile; the claim: model, the titles in use, the conversation
    # INSERTed with its lease and counters, the two messages (one INSERT on PostgreSQL;
    # one transaction; no path to
    # read in a conversation that has none, so the model call's messages are known); the
    # freeze with the profile read first (one transaction).
    assert counted(queries) == (1 + 5 - ONE_INSERT + 6, 2)
    # The model call's messages, as a read of the path gives them.
    assert start.facts.messages[1:] == [{"role": "user", "content": "Plan the staging deploy"}]
    assert (
        start.facts.messages[1:] == api_messages(session_id=start.session.pk, system_prompt="")[1:]
    )
    assert start.lease.release()
    stored = Session.objects.get(pk=start.session.pk)
    assert stored.message_count == 2
    # The conversation starts with its first message, not after it.
    assert stored.started_at == stored.last_activity_at == start.user_message.timestamp


def test_a_later_turn_is_claimed_and_read_in_four_or_five_statements(owner, scripted):
    first = turn_open(user=owner, session_id=None, text="Hello")
    Message.objects.filter(pk=first.assistant_message.pk).update(
        status="complete", content="Hi.", prompt_tokens=40, completion_tokens=5
    )
    first.lease.release()
    with CaptureQueriesContext(connection) as queries:
        start = turn_open(user=owner, session_id=first.session.pk, text="Again")
    # The conversation with its prompt, the quota and the profile; its lease, the path
    # (its tip is the new message's parent; the rest, the model call's messages), the two
    # new messages (one INSERT on PostgreSQL; one transaction).
    assert counted(queries) == (5 - ONE_INSERT, 1)
    assert start.facts is not None and start.facts.messages[1:] == [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "Again"},
    ]
    # What a fresh read of the path sends, byte for byte (the provider's prefix cache).
    assert start.facts.messages == api_messages(
        session_id=start.session.pk, system_prompt=start.facts.prompt
    )
    assert start.user_message.parent_id == first.assistant_message.pk
    start.lease.release()


def test_a_later_turn_on_a_catalog_model_reads_its_entry_once(owner, scripted, second):  # noqa: F811
    entry = add_entry(second)
    first = turn_open(user=owner, session_id=None, text="Hello", model=str(entry.pk))
    Message.objects.filter(pk=first.assistant_message.pk).update(
        status="complete", content="Hi.", prompt_tokens=40, completion_tokens=5
    )
    first.lease.release()
    with CaptureQueriesContext(connection) as queries:
        start = turn_open(user=owner, session_id=first.session.pk, text="Again")
    # The preflight asks for the model's window and the setup for the model: one read.
    entry_reads = [q for q in queries.captured_queries if "model_catalog_modelentry" in q["sql"]]
    assert len(entry_reads) == 1
    assert counted(queries) == (6 - ONE_INSERT, 1)  # a later turn's, and the entry
    assert start.facts.model.ref == str(entry.pk)
    start.lease.release()
    # Disabled since: the next turn reads the entry anew and falls back to the default.
    ModelEntry.objects.filter(pk=entry.pk).update(enabled=False)
    Message.objects.filter(pk=start.assistant_message.pk).update(status="complete", content="Ok.")
    start = turn_open(user=owner, session_id=first.session.pk, text="Still there?")
    assert start.facts is None  # its model is gone: the turn switches it once tabs listen
    facts = turn_facts(session=start.session, user=owner, recalling=True)
    assert facts.model.ref != str(entry.pk)
    assert Message.objects.filter(session=start.session, kind=Message.Kind.MODEL_SWITCH).exists()
    start.lease.release()
