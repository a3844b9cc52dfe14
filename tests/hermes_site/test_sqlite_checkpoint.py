"""The ASGI process's SQLite checkpoints happen in a thread of their own, never in a turn's
commit (core/db/checkpoint.py)."""

from __future__ import annotations

import fcntl
import sqlite3
import time
from contextlib import closing

import pytest
from django.db import connection

from core.db import checkpoint
from core.db.checkpoint import sqlite_checkpoint_in_background, sqlite_checkpoint_stop

pytestmark = pytest.mark.django_db(transaction=True)
sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's checkpoints")


@pytest.fixture
def checkpointer():
    # One the ASGI application started when a test imported it: stopped for this test, and
    # started again after it.
    was_running = checkpoint._running is not None
    sqlite_checkpoint_stop()
    connection.close()  # the connections opened from here on are this process's new ones
    yield sqlite_checkpoint_in_background(every=0.05)
    sqlite_checkpoint_stop()
    connection.close()
    if was_running:
        sqlite_checkpoint_in_background()


def autocheckpoint() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        return cursor.fetchone()[0]


@sqlite_only
def test_connections_leave_checkpoints_to_the_thread_and_get_them_back_after(checkpointer):
    assert autocheckpoint() == 0
    assert sqlite_checkpoint_in_background() is checkpointer  # started once per process
    sqlite_checkpoint_stop()
    connection.close()
    assert autocheckpoint() == 1000  # SQLite's own, as in the worker and commands


def rows_in_the_database_file(path: str, table: str = "checkpoint_probe") -> int:
    """Rows of the probe table in the database file itself, not in its WAL (an immutable
    connection reads the file only; while the thread copies pages it may read a mix)."""
    try:
        with closing(sqlite3.connect(f"file:{path}?immutable=1", uri=True)) as db:
            return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608
    except sqlite3.DatabaseError:  # the table still only in the WAL, or a copy under way
        return 0


def wal_start(path: str) -> bytes:
    """The WAL header's checkpoint sequence number and salts: new each time the WAL starts
    over."""
    with open(f"{path}-wal", "rb") as wal:
        return wal.read(24)[12:24]


@sqlite_only
def test_what_is_written_reaches_the_database_file_without_a_commit_copying_it(checkpointer):
    path = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE checkpoint_probe (data BLOB)")
    try:
        with connection.cursor() as cursor:
            for _ in range(64):
                cursor.execute("INSERT INTO checkpoint_probe VALUES (randomblob(16384))")
        started = wal_start(path)
        # A megabyte: far under the 1,000 pages at which a commit would copy it itself.
        deadline = time.monotonic() + 10
        while rows_in_the_database_file(path) < 64 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rows_in_the_database_file(path) == 64
        # With no write of ours since, the WAL was started over by the thread's own write.
        while wal_start(path) == started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert wal_start(path) != started
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA user_version")  # that write changed nothing
            assert cursor.fetchone()[0] == 0
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE checkpoint_probe")


@pytest.mark.skipif(connection.vendor == "sqlite", reason="other databases")
def test_other_databases_keep_their_own_checkpoints():
    assert sqlite_checkpoint_in_background() is None
    assert checkpoint._running is None


@sqlite_only
def test_one_process_checkpoints_and_another_takes_over_when_it_ends(checkpointer):
    path = connection.settings_dict["NAME"]
    with open(f"{path}-checkpoint.lock", "a+") as other_process:
        fcntl.flock(other_process, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its thread holds it
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE checkpoint_handover (data BLOB)")
            cursor.execute("INSERT INTO checkpoint_handover VALUES (randomblob(16384))")
        time.sleep(0.5)  # ten rounds of this process's thread
        assert rows_in_the_database_file(path, "checkpoint_handover") == 0
    # That process ended: its lock went with it.
    try:
        deadline = time.monotonic() + 10
        while (
            rows_in_the_database_file(path, "checkpoint_handover") < 1
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert rows_in_the_database_file(path, "checkpoint_handover") == 1
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE checkpoint_handover")
