"""The ASGI process's SQLite checkpoints happen in a thread of their own, never in a turn's
commit (core/db/checkpoint.py)."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing

import pytest
from django.db import connection

from core.db.checkpoint import sqlite_checkpoint_in_background, sqlite_checkpoint_stop

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's checkpoints"),
]


@pytest.fixture
def checkpointer():
    sqlite_checkpoint_stop()  # one the ASGI application started when a test imported it
    connection.close()  # the connections opened from here on are this process's new ones
    yield sqlite_checkpoint_in_background(every=0.05)
    sqlite_checkpoint_stop()
    connection.close()


def autocheckpoint() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        return cursor.fetchone()[0]


def test_connections_leave_checkpoints_to_the_thread_and_get_them_back_after(checkpointer):
    assert autocheckpoint() == 0
    assert sqlite_checkpoint_in_background() is checkpointer  # started once per process
    sqlite_checkpoint_stop()
    connection.close()
    assert autocheckpoint() == 1000  # SQLite's own, as in the worker and commands


def rows_in_the_database_file(path: str) -> int:
    """Rows of the probe table in the database file itself, not in its WAL (an immutable
    connection reads the file only)."""
    with closing(sqlite3.connect(f"file:{path}?immutable=1", uri=True)) as db:
        try:
            return db.execute("SELECT count(*) FROM checkpoint_probe").fetchone()[0]
        except sqlite3.OperationalError:  # the table itself is still only in the WAL
            return 0


def test_what_is_written_reaches_the_database_file_without_a_commit_copying_it(checkpointer):
    path = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE checkpoint_probe (data BLOB)")
    try:
        with connection.cursor() as cursor:
            for _ in range(64):
                cursor.execute("INSERT INTO checkpoint_probe VALUES (randomblob(16384))")
        # A megabyte: far under the 1,000 pages at which a commit would copy it itself.
        deadline = time.monotonic() + 10
        while rows_in_the_database_file(path) < 64 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rows_in_the_database_file(path) == 64
        with connection.cursor() as cursor:
            # The thread starts the WAL over with a write that changes nothing.
            cursor.execute("PRAGMA user_version")
            assert cursor.fetchone()[0] == 0
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE checkpoint_probe")
