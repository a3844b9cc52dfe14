"""The PostgreSQL backend's health check (core/db/postgresql): a connection that just ran a
query is not asked `SELECT 1` at the start of the next unit of work; one that was idle is,
and a connection the server dropped meanwhile is replaced before anyone uses it."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import OperationalError, close_old_connections, connection

from core.db.postgresql import base

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's backend"),
]


@pytest.fixture
def checks(monkeypatch, settings):
    """The health checks asked (calls of is_usable), with health checks on."""
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", True)
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    asked: list[float] = []
    usable = base.DatabaseWrapper.is_usable

    def counted(self):
        asked.append(time.monotonic())
        return usable(self)

    monkeypatch.setattr(base.DatabaseWrapper, "is_usable", counted)
    close_old_connections()
    connection.close()
    return asked


def unit_of_work() -> int:
    """What database_sync_to_async does around every call: obsolete connections are closed
    before and after it."""
    close_old_connections()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]
    finally:
        close_old_connections()


def test_a_connection_that_just_worked_is_not_asked_again(checks):
    first = unit_of_work()
    assert [unit_of_work() for _ in range(5)] == [first] * 5
    assert checks == []


def test_an_idle_connection_is_checked_first(checks, monkeypatch):
    monkeypatch.setattr(base, "HEALTHY_FOR", 0.05)
    first = unit_of_work()
    time.sleep(0.1)
    assert unit_of_work() == first
    assert len(checks) == 1


def test_a_connection_the_server_dropped_while_idle_is_replaced_unseen(checks, monkeypatch):
    monkeypatch.setattr(base, "HEALTHY_FOR", 0.05)
    first = unit_of_work()
    params = connection.get_connection_params()
    with psycopg.connect(**{**params, "autocommit": True}) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [first])
    time.sleep(0.1)
    second = unit_of_work()  # no error: the check found it gone and Django reconnected
    assert second != first and len(checks) == 1


def test_a_connection_dropped_right_after_use_fails_once_and_is_then_replaced(checks):
    # Within the second after its last query a connection is taken as it is: if the server
    # dropped it just then, that unit of work's query fails, and Django replaces the
    # connection at the next one.
    first = unit_of_work()
    params = connection.get_connection_params()
    with psycopg.connect(**{**params, "autocommit": True}) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [first])
    with pytest.raises(OperationalError):
        unit_of_work()
    assert unit_of_work() != first
