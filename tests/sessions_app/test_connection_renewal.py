"""A database connection near CONN_MAX_AGE is replaced at the end of a turn, after the
person has their answer, and warmed with the reads of their next turn; the next turn then
starts on it instead of opening one (core/db/renew.py). On the real database: PostgreSQL
for the replacement; SQLite keeps its connection for good and nothing changes there."""

from __future__ import annotations

import time

import pytest
from django.db import close_old_connections, connection, transaction
from django.test.utils import CaptureQueriesContext

from accounts.models import Profile
from accounts.services import profile_get
from core.db import renew
from sessions_app import answers
from sessions_app.agent.llm.cost import CallUsage
from sessions_app.agent.prepare import turn_open
from sessions_app.agent.runner import _after_turn_checks

pytestmark = pytest.mark.django_db(transaction=True)

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite keeps its connection (CONN_MAX_AGE None)"
)


@pytest.fixture
def max_age(monkeypatch):
    """Connections live 60 s, as by default on PostgreSQL."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    connection.close()
    connection.ensure_connection()


def backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def age_to(seconds_left: float) -> None:
    """As if the connection had been open for 60 s less `seconds_left`."""
    connection.close_at = time.monotonic() + seconds_left


def answered_turn(owner, session_id=None):
    """A turn claimed and its answer saved, as the runner does before the after-turn checks."""
    start = turn_open(user=owner, session_id=session_id, text="Plan the staging deploy")
    answers.assistant_finish(
        message_id=start.assistant_message.pk,
        content="Here is the plan.",
        status="complete",
        usage=CallUsage("scripted", prompt_tokens=900, completion_tokens=100),
        finish_reason="stop",
        lease=start.lease,
    )
    return start


def after_turn(start, owner) -> None:
    _after_turn_checks(
        session=start.session,
        next_prompt=1000,
        window=100_000,
        tool_iterations=0,
        jobs=[],
        user=owner,
    )


@postgresql_only
def test_an_ageing_connection_is_replaced_after_the_turn_and_the_next_turn_keeps_it(
    owner, scripted, max_age
):
    start = answered_turn(owner)
    old = backend()
    age_to(10)  # in the last quarter of its 60 s
    with CaptureQueriesContext(connection) as warming:
        after_turn(start, owner)
    new = backend()
    assert new != old
    # It starts a new 60 s, and it read what the next turn reads: the conversation, its
    # path and the profile.
    assert connection.close_at - time.monotonic() > 55
    read = " ".join(q["sql"] for q in warming.captured_queries).lower()
    assert "sessions_app_session" in read and "accounts_profile" in read
    # The next turn, a unit of work like any other, runs on that connection.
    close_old_connections()
    start = turn_open(user=owner, session_id=start.session.pk, text="And the rollback?")
    assert start.lease is not None and backend() == new
    start.lease.release()


@postgresql_only
def test_a_younger_connection_is_kept(owner, scripted, max_age):
    start = answered_turn(owner)
    old = backend()
    age_to(20)
    after_turn(start, owner)
    assert backend() == old


@postgresql_only
def test_a_connection_inside_a_transaction_is_not_touched(max_age):
    warmed = []
    with transaction.atomic():
        old = backend()
        age_to(1)
        assert renew.renew_ageing(warm=lambda: warmed.append(1)) is False
        assert backend() == old
    assert warmed == []


@postgresql_only
def test_a_connection_with_uncommitted_work_outside_atomic_is_not_touched(owner, max_age):
    profile_get(user=owner)
    connection.set_autocommit(False)
    try:
        Profile.objects.filter(user=owner).update(identity="Not committed yet.")
        old = backend()
        age_to(1)
        assert renew.renew_ageing() is False
        assert backend() == old
        connection.commit()
    finally:
        connection.set_autocommit(True)
    assert Profile.objects.get(user=owner).identity == "Not committed yet."


@postgresql_only
@pytest.mark.parametrize("age", [0, None])
def test_connections_per_unit_of_work_or_for_good_are_left_alone(monkeypatch, age):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", age)
    connection.close()
    old = backend()
    assert renew.renew_ageing() is False
    assert backend() == old


@postgresql_only
def test_a_failing_warm_up_is_logged_and_the_new_connection_kept(max_age, caplog):
    old = backend()
    age_to(5)

    def broken():
        raise RuntimeError("the conversation was deleted meanwhile")

    assert renew.renew_ageing(warm=broken) is True
    assert backend() != old
    assert "warming a renewed database connection failed" in caplog.text


def test_on_sqlite_the_connection_is_kept_for_good(owner, scripted):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's connection")
    start = answered_turn(owner)
    before = connection.connection
    after_turn(start, owner)
    assert connection.connection is before and connection.close_at is None
