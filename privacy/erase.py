"""Erasure (GDPR Art. 17): "Delete my account", "Forget all memory", and the storage scrub
that makes deleted text unrecoverable.

Per-object erasure (one memory entry, conversation, skill, inference) lives in each app's
services (`memory_entry_delete`, `session_delete`, `skill_delete`, …); this module is about
everything of a person at once. Account erasure removes:

- every row of every registered table (core/privacy/registry.py), then the user row (which
  cascades whatever else points at it), the frozen system prompts nobody else uses, the
  admin's history entries about the person's rows, and their login sessions;
- their export archives and build directories on disk (crashed builds' too) and the
  Celery results of those exports;
- their channel-layer groups and the socket messages still queued for them, after their
  open sockets were told to close;
- and the bytes: on SQLite (secure_delete is on for every connection) the FTS5 indexes
  are merged ('optimize') so no old segment keeps a token, and the WAL is checkpointed and
  truncated; on PostgreSQL a follow-up task VACUUMs the tables.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.contrib.sessions.models import Session as LoginSession
from django.db import connection, transaction
from django.db.models import CharField
from django.db.models.functions import Cast
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.exceptions import ServiceError
from core.privacy import registry
from core.queue import task_send
from core.realtime import session_group, user_group

logger = logging.getLogger(__name__)


@dataclass
class ErasureReport:
    #: Rows deleted per table label ("sessions_app.Message": 120).
    rows: dict[str, int] = field(default_factory=dict)
    files: int = 0

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def check_password(*, user: AbstractBaseUser, password: Any, request: HttpRequest | None) -> None:
    """Refuse unless `password` is the user's current password; the attempts count against
    the login throttle (429 `too_many_attempts` once over its limits)."""
    from accounts.throttle import password_confirm

    if not isinstance(password, str) or not password:
        raise ServiceError("password_required", gettext_lazy("Type your password to confirm."))
    if not password_confirm(request=request, user=user, password=password):
        raise ServiceError("wrong_password", gettext_lazy("That is not your password."), status=403)


def _owned_pks(entry: registry.PersonalData, user: AbstractBaseUser) -> Any:
    # A subquery of this person's primary keys: a to-many owner path may repeat rows, and
    # Django refuses delete() after distinct().
    return entry.model._default_manager.filter(
        pk__in=entry.model._default_manager.filter(**{entry.owner_path: user}).values("pk")
    )


def _delete_registered(
    user: AbstractBaseUser, report: ErasureReport, *, only_memory: bool = False
) -> None:
    for entry in registry.entries():
        if entry.on_erase != "delete" or (only_memory and not entry.memory):
            continue
        deleted, per_model = _owned_pks(entry, user).delete()
        for label, count in per_model.items():
            if count:
                report.rows[label] = report.rows.get(label, 0) + count


def _delete_admin_history(user: AbstractBaseUser) -> int:
    """The admin's "recent actions" name the objects they touched (object_repr is the row's
    text): delete the entries about this person's rows and about their account."""
    deleted = 0
    for entry in registry.entries():
        content_type = ContentType.objects.get_for_model(entry.model, for_concrete_model=False)
        ids = (
            entry.model._default_manager.filter(**{entry.owner_path: user})
            .annotate(pk_text=Cast("pk", CharField()))
            .values("pk_text")
        )
        deleted += LogEntry.objects.filter(content_type=content_type, object_id__in=ids).delete()[0]
    user_type = ContentType.objects.get_for_model(get_user_model())
    deleted += LogEntry.objects.filter(content_type=user_type, object_id=str(user.pk)).delete()[0]
    return deleted


def _delete_login_sessions(user: AbstractBaseUser) -> int:
    """Database sessions are not keyed by user: decode the live ones and drop theirs."""
    deleted = 0
    key = str(user.pk)
    for session in LoginSession.objects.filter(expire_date__gt=timezone.now()).iterator():
        try:
            data = session.get_decoded()
        except Exception:  # noqa: BLE001 - a corrupt session is simply not theirs
            continue
        if str(data.get("_auth_user_id", "")) == key:
            session.delete()
            deleted += 1
    return deleted


def account_erase(
    *,
    user: AbstractBaseUser,
    password: Any = None,
    confirm: Any = None,
    actor: AbstractBaseUser | None = None,
    request: HttpRequest | None = None,
) -> ErasureReport:
    """Delete `user` and everything about them. The person confirms with their password
    (checked behind the login throttle, keyed by `request`'s client address too), or, with
    no password (single sign-on, an auth proxy), with a recent sign-in and their username
    as `confirm` (accounts/reauth.py); a superuser (`actor`, the admin) needs neither.
    After the transaction commits: export files go, sockets are closed, storage is scrubbed
    and a follow-up task clears the channel layer (and VACUUMs on PostgreSQL)."""
    from sessions_app.agent.runner import control_group
    from sessions_app.models import Session, SystemPrompt

    from .models import ExportJob

    if actor is None or actor.pk == user.pk:
        if user.has_usable_password():
            check_password(user=user, password=password, request=request)
        else:
            from accounts.reauth import confirm_without_password

            confirm_without_password(request=request, user=user, confirm=confirm)
    elif not (actor.is_active and actor.is_superuser):
        raise ServiceError(
            "forbidden", gettext_lazy("Only a superuser can delete someone's account."), status=403
        )
    user_id = user.pk
    report = ErasureReport()
    with transaction.atomic():
        session_ids = list(Session.objects.filter(owner=user).values_list("id", flat=True))
        prompt_hashes = set(
            Session.objects.filter(owner=user, system_prompt__isnull=False).values_list(
                "system_prompt_id", flat=True
            )
        )
        jobs = list(ExportJob.objects.filter(owner=user))
        report.rows["admin.LogEntry"] = _delete_admin_history(user)
        _delete_registered(user, report)
        # Prompts are stored once per distinct text; keep the ones another person uses.
        orphans = SystemPrompt.objects.filter(hash__in=prompt_hashes, sessions__isnull=True)
        report.rows["sessions_app.SystemPrompt"] = orphans.delete()[0]
        report.rows["sessions.Session"] = _delete_login_sessions(user)
        _deleted, per_model = get_user_model()._default_manager.filter(pk=user_id).delete()
        for label, count in per_model.items():
            report.rows[label] = report.rows.get(label, 0) + count
    groups = [user_group(user_id)]
    for session_id in session_ids:
        groups += [session_group(session_id), control_group(session_id)]

    def after_commit() -> None:
        from accounts.signals import close_sockets_of

        from .jobs import export_files_delete, export_files_of_delete

        report.files = export_files_delete(jobs=jobs) + export_files_of_delete(user_id=user_id)
        _forget_task_results([j.task_id for j in jobs if j.task_id])
        close_sockets_of(user_id)
        storage_compact()
        # Give the sockets a moment to receive their close before their queues are purged.
        task_send("accounts.erasure_followup", user_id, groups, countdown=3)

    transaction.on_commit(after_commit)
    logger.info("account %s erased", user_id, extra={"erased_rows": report.total})
    return report


def memory_forget_all(*, user: AbstractBaseUser) -> ErasureReport:
    """ "Forget all memory": every memory entry (pending proposals included), the memory
    audit log, the records of which entries each prompt showed, and every other table
    registered with `memory=True` (inferences). Conversations keep their frozen prompts;
    deleting a conversation removes its prompt too."""
    report = ErasureReport()
    with transaction.atomic():
        _delete_registered(user, report, only_memory=True)
    transaction.on_commit(storage_compact)
    return report


# --- making it unrecoverable ----------------------------------------------------------------


def storage_compact() -> list[str]:
    """SQLite: merge the FTS5 indexes and checkpoint + truncate the WAL, so deleted text is
    in neither an old index segment nor an old WAL frame (freed pages are zeroed by
    secure_delete). PostgreSQL: nothing here; the follow-up task VACUUMs. Call outside a
    transaction; returns what it did."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return []
    from core.maintenance import database_optimize

    try:
        return database_optimize()
    except Exception:  # noqa: BLE001 - the follow-up task tries again
        logger.exception("storage compaction after erasure failed")
        return []


def _vacuum_tables() -> list[str]:
    from django.apps import apps

    tables = {entry.model._meta.db_table for entry in registry.entries()}
    for label in ("auth.User", "sessions.Session", "admin.LogEntry"):
        try:
            tables.add(apps.get_model(label)._meta.db_table)
        except LookupError:
            continue
    return sorted(tables)


def erasure_scrub(*, user_id: int, groups: list[str]) -> list[str]:
    """The follow-up of an erasure (Celery): purge the channel groups, then compact
    storage again (SQLite) or VACUUM the tables (PostgreSQL). Idempotent."""
    done = [f"channel messages purged: {channel_groups_purge(groups)}"]
    if connection.vendor == "sqlite":
        done += storage_compact()
    elif connection.vendor == "postgresql" and not connection.in_atomic_block:
        quoted = ", ".join(connection.ops.quote_name(t) for t in _vacuum_tables())
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM (ANALYZE) {quoted}")
        done.append("VACUUM (ANALYZE)")
    logger.info("erasure follow-up for %s", user_id, extra={"steps": done})
    return done


def _forget_task_results(task_ids: list[str]) -> None:
    if not task_ids:
        return
    from celery import current_app as app
    from celery.result import AsyncResult

    for task_id in task_ids:
        try:
            AsyncResult(task_id, app=app).forget()
        except Exception:  # noqa: BLE001 - a backend without forget() keeps nothing personal
            logger.warning("could not forget Celery result %s", task_id)


# --- the channel layer ----------------------------------------------------------------------


def channel_groups_purge(groups: list[str]) -> int:
    """Remove the groups and every queued socket message addressed only to their members
    (close requests excepted); returns how many messages were dropped."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return 0
    return async_to_sync(_purge)(layer, groups)


async def _purge(layer: Any, groups: list[str]) -> int:
    from channels.layers import InMemoryChannelLayer

    if isinstance(layer, InMemoryChannelLayer):
        for group in groups:
            layer.groups.pop(group, None)
        return 0
    try:
        from channels_redis.core import RedisChannelLayer
    except ImportError:  # pragma: no cover - channels_redis is a requirement
        return 0
    if not isinstance(layer, RedisChannelLayer):
        return 0
    members: set[str] = set()
    for group in groups:
        key = layer._group_key(group)
        conn = layer.connection(layer.consistent_hash(group))
        members.update(m.decode("utf-8") for m in await conn.zrange(key, 0, -1))
        await conn.delete(key)
    dropped = 0
    queues: set[tuple[int, str]] = set()
    for channel in members:
        name = layer.non_local_name(channel) if "!" in channel else channel
        index = layer.consistent_hash(name) if "!" in channel else None
        keys = [layer.prefix + name, layer.prefix + name + "$inflight"]
        indexes = [index] if index is not None else range(layer.ring_size)
        for i in indexes:
            for key in keys:
                queues.add((i, key))
    for index, key in queues:
        conn = layer.connection(index)
        for raw in await conn.zrange(key, 0, -1):
            try:
                message = layer.deserialize(raw)
            except Exception:  # noqa: BLE001 - not ours to judge
                continue
            if message.get("type") == "auth.revoked":
                continue  # the close request must still reach the socket
            targets = message.get("__asgi_channel__")
            if isinstance(targets, str):
                targets = [targets]
            if targets and all(t in members for t in targets):
                dropped += await conn.zrem(key, raw)
    return dropped
