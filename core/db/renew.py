"""Replacing an ageing database connection between a person's turns instead of inside one.

Django retires a connection that has outlived CONN_MAX_AGE when the next unit of work
starts (Channels' `database_sync_to_async` closes obsolete connections around every call),
so the unit of work that comes after pays for a new connection and for a new PostgreSQL
backend's first queries, whose catalog caches are empty: on this machine a later turn's
claim took ~8 ms more on a fresh connection than on a warm one, once a minute at the
default age. `renew_ageing()` runs at the end of a turn's last trip to the database thread,
after the person has their answer: a connection in the last part of its age is closed and
opened again there, and `warm` runs the reads the next turn will make on it. Connections
are still replaced as often as CONN_MAX_AGE asks; only the moment changes. A connection
kept forever (SQLite's, CONN_MAX_AGE None) or opened per unit of work (0) is left alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.db import connections

logger = logging.getLogger(__name__)

#: The last share of CONN_MAX_AGE in which a connection is replaced at the end of a turn.
RENEW_WITHIN = 0.25


def renew_ageing(warm: Callable[[], object] | None = None) -> bool:
    """Replace this thread's connections that are within RENEW_WITHIN of their age limit
    and in autocommit (outside a transaction, nothing left uncommitted), then run `warm`
    on them; True if one was replaced. A failure is logged, not raised: the next unit of
    work connects as it always did."""
    renewed = False
    for conn in connections.all(initialized_only=True):
        max_age = conn.settings_dict["CONN_MAX_AGE"]
        if not max_age or conn.connection is None or not conn.get_autocommit():
            continue  # inside a transaction, or with work not committed yet
        if time.monotonic() < conn.close_at - max_age * RENEW_WITHIN:
            continue
        try:
            conn.close()
            conn.ensure_connection()
        except Exception:
            logger.exception("could not renew the %s database connection", conn.alias)
            continue
        renewed = True
    if renewed and warm is not None:
        try:
            warm()
        except Exception:  # noqa: BLE001 - e.g. the conversation was deleted meanwhile
            logger.warning("warming a renewed database connection failed", exc_info=True)
    return renewed
