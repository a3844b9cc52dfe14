"""The search's statements on the real database: a refusal is "no hits" and leaves a caller's
transaction usable; on PostgreSQL a statement that may scan runs without parallel workers,
a plan or a read by id runs as it is, and the setting never outlives the statement."""

from __future__ import annotations

import logging

import pytest
from django.db import connection, transaction

from sessions_app.search.sql import run_read

pytestmark = pytest.mark.django_db(transaction=True)

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's parallel workers"
)
SETTING = "SELECT current_setting('max_parallel_workers_per_gather')"


def server_default() -> str:
    with connection.cursor() as cursor:
        cursor.execute(SETTING)
        return cursor.fetchone()[0]


@pytest.mark.parametrize("scan", [True, False])
def test_a_refused_statement_is_no_hits_and_says_only_its_kind(scan, caplog):
    with caplog.at_level(logging.WARNING, logger="sessions_app.search.sql"):
        assert (
            run_read(
                "SELECT no_such_column FROM sessions_app_message WHERE content = %s",
                ["secret words"],
                scan=scan,
            )
            == []
        )
    assert "search query refused by the database" in caplog.text
    assert "secret words" not in caplog.text


@pytest.mark.parametrize("scan", [True, False])
def test_a_refusal_inside_a_callers_transaction_leaves_it_usable(scan):
    with transaction.atomic():
        assert run_read("SELECT no_such_column FROM sessions_app_message", [], scan=scan) == []
        assert run_read("SELECT 1", [], scan=scan) == [(1,)]


@postgresql_only
def test_a_scan_runs_without_parallel_workers_and_the_setting_does_not_leak():
    default = server_default()
    assert default != "0"  # else this test could not tell
    assert run_read(SETTING, []) == [("0",)]
    assert server_default() == default
    with transaction.atomic():
        # In a caller's transaction its settings are its own business.
        assert run_read(SETTING, []) == [(default,)]


@postgresql_only
def test_a_plan_or_a_read_by_id_runs_as_it_is():
    default = server_default()
    assert run_read(SETTING, [], scan=False) == [(default,)]
