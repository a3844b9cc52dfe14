"""SQLite's checkpoints off the chat's path, in a thread of the process that serves turns.

In WAL mode a commit appends to the `-wal` file; copying those pages back into the database
file (a checkpoint, which syncs the file to disk) is done by whichever commit finds the WAL
past 1,000 pages. With a chat's writes (two messages, their full-text indexes, the answer
as it grows) that was every ~15th turn, and that turn's claim took 2–5 ms longer before the
model was called: the slowest twentieth of a person's times to first token. PostgreSQL
keeps that work in a checkpointer process of its own; here a thread of the ASGI process
checkpoints every CHECKPOINT_EVERY seconds and the process's own connections never do.
The work is the same (a PASSIVE checkpoint, as the automatic one is: it never blocks a
reader or a writer, and copies what no reader still needs); it moves out of the commit.

After a checkpoint that copied everything (no reader still in the WAL), the next commit
starts the WAL over, and that first write syncs the WAL's new header (~1 ms): the thread
makes that write itself (the database's `user_version`, set to the value it has), so a
turn's commit does not. A round with nothing committed by another connection since the last
complete checkpoint (`data_version` unchanged) does nothing. With several ASGI processes one
thread checkpoints, the one holding a lock on `<database>-checkpoint.lock`; the others try
to take it at each round (the system frees it with a process that ends), so their writes
do not wake each other's threads forever.

Other processes (the worker, management commands) keep SQLite's automatic checkpoints.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
from typing import Any

from django.db import connections
from django.db.backends.signals import connection_created

logger = logging.getLogger(__name__)

#: Seconds between two checkpoints of the background thread.
CHECKPOINT_EVERY = 1.0


class _Checkpointer:
    """The process's checkpoint thread, started with its first SQLite connection (the
    database that connection opens is the one checkpointed)."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def connection_created(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        if connection.vendor != "sqlite":
            return
        # On the driver's connection: a setting of the connection, not one of its queries.
        connection.connection.execute("PRAGMA wal_autocheckpoint=0")
        with self.lock:
            if self.thread is not None:
                return
            settings = connection.settings_dict
            self.thread = threading.Thread(
                target=_checkpoints,
                args=(settings["NAME"], float(settings["OPTIONS"].get("timeout", 5))),
                kwargs={"every": self.every, "stopped": self.stopped},
                name="sqlite-checkpoint",
                daemon=True,
            )
            self.thread.start()


_running: _Checkpointer | None = None


def sqlite_checkpoint_in_background(*, every: float = CHECKPOINT_EVERY) -> threading.Event | None:
    """For a SQLite default database: the connections this process opens from now on leave
    checkpoints to a daemon thread that runs one every `every` seconds. Returns the event
    that stops the thread (None with PostgreSQL); a second call changes nothing (its `every`
    included)."""
    global _running
    if connections["default"].vendor != "sqlite":
        return None
    if _running is None:
        _running = _Checkpointer(every)
        connection_created.connect(_running.connection_created, weak=False)
    return _running.stopped


def sqlite_checkpoint_stop() -> None:
    """Stop the thread (waiting for its round to end) and give the connections opened from
    now on their automatic checkpoints back (tests)."""
    global _running
    if _running is not None:
        _running.stopped.set()
        connection_created.disconnect(_running.connection_created)
        if _running.thread is not None:
            _running.thread.join()
        _running = None


def _checkpoints(path: str, timeout: float, *, every: float, stopped: threading.Event) -> None:
    db: sqlite3.Connection | None = None
    seen = None
    failures = 0
    lock = os.open(f"{path}-checkpoint.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while not stopped.wait(every * min(2**failures, 60)):
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another process's thread checkpoints
            try:
                if db is None:
                    db = sqlite3.connect(path, timeout=timeout, isolation_level=None)
                version = db.execute("PRAGMA data_version").fetchone()[0]
                if version != seen and _checkpoint(db):
                    seen = version
                failures = 0
            except Exception:
                # Retried on a new connection, less often while it keeps failing; meanwhile
                # the WAL only grows (readers still see every commit).
                failures += 1
                logger.exception("SQLite checkpoint failed (%s in a row)", failures)
                if db is not None:
                    db.close()
                    db = None
    finally:
        os.close(lock)  # frees the lock for another process's thread
        if db is not None:
            db.close()


def _checkpoint(db: sqlite3.Connection) -> bool:
    """A PASSIVE checkpoint; True when it copied the whole WAL (or found it empty)."""
    busy, frames, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    if busy or copied < frames:
        return False  # a reader still needs part of the WAL: the next round goes on
    if frames > 0:  # the next write starts the WAL over: this one
        db.execute("BEGIN IMMEDIATE")
        try:
            (version,) = db.execute("PRAGMA user_version").fetchone()
            db.execute(f"PRAGMA user_version = {int(version)}")
        finally:
            db.execute("COMMIT")
    return True
