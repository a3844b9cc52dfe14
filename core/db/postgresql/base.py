"""PostgreSQL as Django ships it, with the connection health check (CONN_HEALTH_CHECKS)
asked only of a connection that has been idle.

Channels' `database_sync_to_async` closes obsolete connections around every call, which
makes every call a unit of work for Django: with health checks on, each one starts with a
`SELECT 1`. A chat turn makes three or four such calls, so its connection was asked, a few
milliseconds after its last query, whether it still worked; on a busy process each of those
round trips also waits for the interpreter lock. Here a connection that ran a query less
than HEALTHY_FOR seconds ago is taken as it is. One idle for longer (where a restarted
server or a dropped connection shows) is checked as before; a query that fails on a
connection that broke within that second marks it, and Django replaces it at the next
unit of work.
"""

from __future__ import annotations

import time

from django.db.backends.postgresql import base
from django.utils.asyncio import async_unsafe

#: Seconds after its last query during which a connection is not health-checked.
HEALTHY_FOR = 1.0


class DatabaseWrapper(base.DatabaseWrapper):
    _queried_at: float | None = None

    def create_cursor(self, name: str | None = None):  # noqa: ANN201 - Django's signature
        self._queried_at = time.monotonic()
        return super().create_cursor(name)

    def close_if_health_check_failed(self) -> None:
        recent = self._queried_at is not None and time.monotonic() - self._queried_at < HEALTHY_FOR
        if self.connection is not None and recent and not self.errors_occurred:
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    @async_unsafe
    def close(self) -> None:
        self._queried_at = None
        super().close()
