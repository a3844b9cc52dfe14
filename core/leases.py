"""Leases: who works on a row right now, for how long, and what happens when they die.

Every piece of work that must run once at a time — a chat turn or a compression on a
conversation, an export build, a search summary, a background review — holds a lease on its
row: two columns, ``lease_owner`` and ``lease_expires_at`` (see :class:`LeaseFields`).

- The **owner** names the work and the process: ``<kind>@<host>:<pid>#<token>``.
- The holder **renews** the expiry every ``HERMES_LEASE_HEARTBEAT`` seconds while it works
  (:func:`lease_heartbeat`, :func:`lease_heartbeat_async`); it expires
  ``HERMES_LEASE_SECONDS`` after the last renewal.
- **Taking** a lease is a conditional UPDATE that must change exactly one row: a free row is
  taken; a row whose lease expired, or whose owner is a dead process of this host, is
  **taken over** — compare-and-swap on the previous owner, and logged. A row that does not
  exist yet is INSERTed leased (:func:`lease_insert`).
- **Releasing** is an UPDATE conditional on the owner, so a late release never frees a lease
  someone else took over; a renewal that changes no row tells the holder it lost the lease.

Each app registers its lease kinds (:func:`lease_kind_register`) with what to do when a
holder is found dead. On startup every process (web and worker) releases the leases of dead
processes of its host (:func:`leases_recover_dead`); :func:`leases_held` lists every lease
held now (the `leases` command, the admin, the chaos tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection, models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=models.Model)

OWNER_MAX = 120
_HOST = socket.gethostname()[:60]
#: Owners this process holds now: an owner with our pid but not in here is a previous
#: process's (a restarted container gets the same pid).
_held: set[str] = set()
_held_lock = threading.Lock()


class LeaseFields(models.Model):
    """The two lease columns, for a model that is worked on by one holder at a time."""

    lease_owner = models.CharField(
        verbose_name=_("lease owner"), max_length=OWNER_MAX, blank=True, default=""
    )
    lease_expires_at = models.DateTimeField(
        verbose_name=_("lease expires at"), null=True, blank=True
    )

    class Meta:
        abstract = True


def process_id() -> str:
    return f"{_HOST}:{os.getpid()}"


def owner_kind(owner: str) -> str:
    return owner.split("@", 1)[0]


def _owner_process(owner: str) -> tuple[str, int] | None:
    try:
        where = owner.split("@", 1)[1].split("#", 1)[0]
        host, pid = where.rsplit(":", 1)
        return host, int(pid)
    except (IndexError, ValueError):
        return None


def owner_is_dead_here(owner: str) -> bool:
    """True when `owner` was a process of this host that no longer runs."""
    process = _owner_process(owner)
    if process is None or process[0] != _HOST:
        return False
    pid = process[1]
    if pid == os.getpid():
        with _held_lock:
            return owner not in _held
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class LeaseLost(Exception):
    """The lease was taken over by another holder: stop, and write nothing more."""


class LeaseBusy(Exception):
    """A live holder (not us) works on the row: try again in `retry_in` seconds."""

    def __init__(self, retry_in: float) -> None:
        super().__init__(f"leased for another {retry_in:.1f}s")
        self.retry_in = retry_in


#: How often a task finding a live lease comes back before giving up (the holder renews
#: it while alive, so this bounds how long a duplicate delivery lingers).
BUSY_RETRIES = 40


def run_leased(task: Any, work: Callable[[], Any]) -> Any:
    """Run `work` in the bound Celery `task`. When another live process holds the lease,
    the task comes back after the lease would expire: by then the holder has finished (the
    work is done, nothing to do) or died (its lease is taken over and the work finished).
    Inline (eager) tasks report "busy" instead of waiting."""
    try:
        return work()
    except LeaseBusy as busy:
        if task.request.is_eager:
            return "busy"
        raise task.retry(countdown=busy.retry_in + 0.5, max_retries=BUSY_RETRIES) from busy


def lease_deadline(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(seconds=settings.HERMES_LEASE_SECONDS)


@dataclass
class Lease:
    """A lease this process holds on row `pk` of `model`."""

    model: type[models.Model]
    pk: Any
    owner: str
    #: The previous owner when this lease was taken over, else "".
    took_over: str = ""
    lost: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def kind(self) -> str:
        return owner_kind(self.owner)

    def _rows(self) -> models.QuerySet:
        return self.model._default_manager.filter(pk=self.pk, lease_owner=self.owner)

    def check(self) -> None:
        """Raise LeaseLost once a renewal found the lease taken over (call between the
        steps of long work, before writing its results)."""
        if self.lost.is_set():
            raise LeaseLost(self.owner)

    def renew(self) -> bool:
        """Push the expiry back; False (and `lost` set) when someone else holds it now."""
        if self._rows().update(lease_expires_at=lease_deadline()) == 1:
            return True
        self.lost.set()
        return False

    def update(self, **fields: Any) -> bool:
        """Write `fields` to the row while still holding the lease (renewing it)."""
        if self._rows().update(lease_expires_at=lease_deadline(), **fields) == 1:
            return True
        self.lost.set()
        return False

    def release(self, **fields: Any) -> bool:
        """Free the lease, writing `fields` in the same UPDATE; False if it was lost."""
        _owner_forget(self.owner)
        return self._rows().update(lease_owner="", lease_expires_at=None, **fields) == 1


def lease_acquire(
    model: type[models.Model],
    pk: Any,
    *,
    kind: str,
    when: Q | None = None,
    values: dict[str, Any] | None = None,
    increments: dict[str, int] | None = None,
) -> Lease | None:
    """Take the lease on row `pk` for `kind` of work, or None when it is held (or the row is
    gone, or does not match `when`). An expired lease, or one of a dead process of this
    host, is taken over. `values` are written in the same UPDATE, and `increments` added to
    those counter columns."""
    if any(hasattr(value, "resolve_expression") for value in (values or {}).values()):
        raise TypeError("a lease's values are plain values; add to a counter with `increments`")
    owner = _owner_new(kind)
    now = timezone.now()
    changes = {"lease_owner": owner, "lease_expires_at": lease_deadline(now), **(values or {})}
    increments = increments or {}
    if _take_free(model, pk, when, changes, increments) == 1:
        return Lease(model, pk, owner)
    rows = model._default_manager.filter(when or Q(), pk=pk)
    current = rows.values_list("lease_owner", "lease_expires_at").first()
    if current is not None:
        previous, expires = current
        dead = expires is None or expires <= now or owner_is_dead_here(previous)
        counted = {name: F(name) + n for name, n in increments.items()}
        if previous and dead and rows.filter(lease_owner=previous).update(**changes, **counted):
            logger.warning(
                "lease taken over: %s %s from %s",
                kind,
                pk,
                previous,
                extra={"lease_kind": kind, "row": str(pk), "previous_owner": previous},
            )
            return Lease(model, pk, owner, took_over=previous)
    _owner_forget(owner)
    return None


def _take_free(
    model: type[models.Model],
    pk: Any,
    when: Q | None,
    changes: dict[str, Any],
    increments: dict[str, int],
) -> int:
    """The UPDATE that takes a free lease: the rows it changed (1 or 0). Every chat turn
    sends it, so its statement is built once per shape (the ORM compiled the UPDATE on each
    call, which took longer than running it) and only the values are prepared."""
    sql, fields, when_params = _free_update(model, when, tuple(changes), tuple(increments))
    params = [
        *(
            f.get_db_prep_save(value, connection=connection)
            for f, value in zip(fields, changes.values(), strict=True)
        ),
        *increments.values(),
        model._meta.pk.get_db_prep_value(pk, connection),
        *when_params,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@functools.cache
def _free_update(
    model: type[models.Model], when: Q | None, names: tuple[str, ...], counters: tuple[str, ...]
) -> tuple[str, list[models.Field], tuple[Any, ...]]:
    """`_take_free`'s statement, the fields whose values it binds in order, and the values
    of its `when` condition (compiled by the ORM, once)."""
    meta = model._meta
    quote = connection.ops.quote_name
    fields = [meta.get_field(name) for name in names]
    counted = [meta.get_field(name).column for name in counters]
    sets = [f"{quote(f.column)} = %s" for f in fields]
    sets += [f"{quote(column)} = {quote(column)} + %s" for column in counted]
    condition, when_params = "", ()
    if when is not None:
        query = model._default_manager.filter(when).query
        if len(query.alias_map) > 1:
            raise ValueError("a lease's condition is on the row's own columns")
        where, when_params = query.get_compiler(connection=connection).compile(query.where)
        condition = f" AND {where}"
    table = quote(meta.db_table)
    sql = (
        f"UPDATE {table} SET {', '.join(sets)} WHERE {quote(meta.pk.column)} = %s"  # noqa: S608 - the model's own names
        f" AND {quote('lease_owner')} = ''{condition}"
    )
    return sql, fields, tuple(when_params)


def lease_insert(model: type[M], /, *, kind: str, **fields: Any) -> tuple[M, Lease]:
    """Create a row of `model` already leased for `kind` of work: nobody else can hold a
    row that did not exist, so its INSERT takes the lease (no UPDATE follows)."""
    owner = _owner_new(kind)
    try:
        row = model._default_manager.create(
            lease_owner=owner, lease_expires_at=lease_deadline(), **fields
        )
    except BaseException:
        _owner_forget(owner)
        raise
    return row, Lease(model, row.pk, owner)


def _owner_new(kind: str) -> str:
    """A new owner for `kind` of work by this process, counted as held from now on."""
    owner = f"{kind}@{process_id()}#{secrets.token_hex(6)}"
    with _held_lock:
        _held.add(owner)
    return owner


def _owner_forget(owner: str) -> None:
    """This process no longer holds `owner` (released, or never taken)."""
    with _held_lock:
        _held.discard(owner)


def lease_remaining(model: type[models.Model], pk: Any) -> float:
    """Seconds until the current lease on the row expires (0 when free, expired or dead)."""
    row = model._default_manager.filter(pk=pk).values_list("lease_owner", "lease_expires_at")
    current = row.first()
    if current is None or not current[0] or current[1] is None:
        return 0.0
    if owner_is_dead_here(current[0]):
        return 0.0
    return max(0.0, (current[1] - timezone.now()).total_seconds())


def lease_is_live(owner: str, expires: datetime | None) -> bool:
    """True when a lease with this owner and expiry still protects its row."""
    return bool(owner) and expires is not None and expires > timezone.now()


def raise_if_held(model: type[models.Model], pk: Any, *, working: Q) -> None:
    """After `lease_acquire` returned None: raise LeaseBusy while a live holder works on row
    `pk` (the row matches `working`), so the caller's task comes back once the lease would
    have expired; return when nobody is on it (done, gone, or not the caller's to do)."""
    row = (
        model._default_manager.filter(working, pk=pk)
        .values_list("lease_owner", "lease_expires_at")
        .first()
    )
    if row is not None and lease_is_live(*row):
        raise LeaseBusy(lease_remaining(model, pk))


@contextlib.contextmanager
def lease_heartbeat(lease: Lease) -> Iterator[Lease]:
    """Renew `lease` from a thread while the block runs (a model call can take minutes).
    Inside a transaction another connection could not see the row, so nothing renews it
    there (inline tasks in tests)."""
    if connection.in_atomic_block:
        yield lease
        return
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.HERMES_LEASE_HEARTBEAT):
                if not lease.renew():
                    logger.warning("lease lost: %s", lease.owner)
                    return
        except Exception:
            logger.exception("lease heartbeat of %s failed", lease.owner)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"lease-{lease.kind}", daemon=True)
    thread.start()
    try:
        yield lease
    finally:
        stop.set()
        thread.join(timeout=5)


async def lease_heartbeat_async(lease: Lease, on_beat: Callable[[], Any] | None = None) -> None:
    """Renew `lease` until cancelled (run as a task beside the async work it protects);
    `on_beat` is awaited after each renewal (the chat turn tells its tabs it is alive)."""
    renew = database_sync_to_async(lease.renew, thread_sensitive=False)
    while True:
        await asyncio.sleep(settings.HERMES_LEASE_HEARTBEAT)
        try:
            if not await renew():
                logger.warning("lease lost: %s", lease.owner)
                return
        except Exception:
            logger.exception("lease heartbeat of %s failed", lease.owner)
            continue
        if on_beat is not None:
            with contextlib.suppress(Exception):
                await on_beat()


# --- kinds, the dead, and what is held ------------------------------------------------------


@dataclass(frozen=True)
class LeaseKind:
    name: str
    model: type[models.Model]
    #: Called with the row ids whose holder died, before their leases are released
    #: (a turn's answer becomes "interrupted").
    on_dead: Callable[[list[Any]], Any] | None = None
    #: The Celery task doing this kind of work, given the row id ("" for work no task does
    #: on its own: a chat turn; a compression, which the next turn schedules again).
    task: str = ""
    #: Rows waiting for that task (e.g. status "queued"); their model has `created_at`.
    waiting: Q | None = None
    #: Rows a holder works on (e.g. status "running").
    working: Q | None = None


_KINDS: dict[str, LeaseKind] = {}


def lease_kind_register(
    name: str,
    model: type[models.Model],
    *,
    on_dead: Callable[[list[Any]], Any] | None = None,
    task: str = "",
    waiting: Q | None = None,
    working: Q | None = None,
) -> None:
    """Declare a kind of lease (call from an app's `ready()`). With `task`, rows matching
    `waiting` or `working` whose task the broker lost are sent again (see
    :func:`leases_requeue_stalled`)."""
    _KINDS[name] = LeaseKind(name, model, on_dead, task, waiting, working)


def lease_kinds() -> dict[str, LeaseKind]:
    return dict(_KINDS)


@dataclass(frozen=True)
class HeldLease:
    kind: str
    model: str
    pk: Any
    owner: str
    expires_at: datetime | None
    expired: bool


def leases_held() -> list[HeldLease]:
    """Every lease held now, expired ones included (they stay until taken over or swept)."""
    now = timezone.now()
    found: list[HeldLease] = []
    for model in {kind.model for kind in _KINDS.values()}:
        rows = model._default_manager.exclude(lease_owner="").values_list(
            "pk", "lease_owner", "lease_expires_at"
        )
        for pk, owner, expires in rows:
            found.append(
                HeldLease(
                    owner_kind(owner),
                    model._meta.label,
                    pk,
                    owner,
                    expires,
                    expires is None or expires <= now,
                )
            )
    return sorted(found, key=lambda h: (h.kind, str(h.pk)))


def leases_recover_dead() -> dict[str, int]:
    """Release the leases of dead processes of this host (call on startup): each kind's
    `on_dead` runs first; returns how many leases of each kind were released."""
    released: dict[str, int] = {}
    for held in leases_held():
        kind = _KINDS.get(held.kind)
        if kind is None or not owner_is_dead_here(held.owner):
            continue
        if kind.on_dead is not None:
            kind.on_dead([held.pk])
        rows = kind.model._default_manager.filter(pk=held.pk, lease_owner=held.owner)
        if rows.update(lease_owner="", lease_expires_at=None):
            logger.warning(
                "released the lease of a dead process: %s %s (%s)",
                held.kind,
                held.pk,
                held.owner,
                extra={"lease_kind": held.kind, "row": str(held.pk), "previous_owner": held.owner},
            )
            released[held.kind] = released.get(held.kind, 0) + 1
    return released


def recover_on_startup(role: str) -> None:
    """:func:`leases_recover_dead`, never failing a process start (no database yet, or not
    migrated: there is nothing to recover)."""
    try:
        released = leases_recover_dead()
    except Exception as exc:  # noqa: BLE001 - no database yet: nothing to recover
        logger.warning("could not check for leases of dead processes (%s): %s", role, exc)
        return
    finally:
        connection.close()
    if released:
        logger.warning("%s start: released leases of dead processes %s", role, released)


def leases_requeue_stalled() -> dict[str, int]:
    """Send the task again for work whose message the broker may have lost (a broker restarted
    without persistence, a worker killed with the task unacknowledged, which Redis redelivers
    only after its visibility timeout of an hour): rows `waiting` since more than
    HERMES_REQUEUE_SECONDS with no lease, and rows `working` under a lease that expired.
    Safe to repeat: the task takes the row's lease first, so an extra delivery finds the work
    done, or busy and comes back later. Returns how many of each kind were sent."""
    from .queue import task_send

    now = timezone.now()
    since = now - timedelta(seconds=settings.HERMES_REQUEUE_SECONDS)
    expired = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now)
    sent: dict[str, int] = {}
    for kind in _KINDS.values():
        if not kind.task:
            continue
        stalled = Q(pk__in=[])
        if kind.waiting is not None:
            stalled |= kind.waiting & Q(lease_owner="", created_at__lt=since)
        if kind.working is not None:
            stalled |= kind.working & expired
        for pk in kind.model._default_manager.filter(stalled).values_list("pk", flat=True):
            task_send(kind.task, pk)
            sent[kind.name] = sent.get(kind.name, 0) + 1
    if sent:
        logger.warning("sent stalled work again: %s", sent, extra={"requeued": sent})
    return sent
