"""Periodic housekeeping (Celery beat): every scheduled task exists, has a time limit, and
does its job idempotently, including on a real worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session as LoginSession
from django.utils import timezone

from accounts.models import LoginThrottle
from core import maintenance
from hermes_site.celery import app as celery_app
from memory.models import MemoryEvent
from memory.services.entries import audit_prune
from sessions_app.maintenance import streams_close_orphaned
from sessions_app.models import Message, Session
from tests.conftest import wait_for


def test_every_scheduled_task_is_registered_with_a_time_limit():
    celery_app.loader.import_default_modules()
    assert settings.CELERY_BEAT_SCHEDULE
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        task = celery_app.tasks.get(entry["task"])
        assert task is not None, f"beat entry {name!r} names an unknown task {entry['task']!r}"
        assert task.time_limit and task.time_limit < 3600, entry["task"]  # < visibility timeout
        assert entry["schedule"] >= 60


def orphan(user, *, claim: str = "", expires_in: timedelta | None = None):
    session = Session.objects.create(
        owner=user,
        title=f"s{Session.objects.count()}",
        lease_owner=claim,
        lease_expires_at=timezone.now() + expires_in if expires_in is not None else None,
    )
    return Message.objects.create(
        session=session, role="assistant", status="streaming", content="half an ans"
    )


@pytest.mark.django_db
def test_prune_closes_answers_orphaned_by_a_dead_process_and_nothing_alive(owner):
    dead_unclaimed = orphan(owner)
    dead_claimed = orphan(owner, claim="turn@elsewhere:1#a", expires_in=timedelta(seconds=-1))
    alive = orphan(owner, claim="turn@elsewhere:1#b", expires_in=timedelta(seconds=20))
    assert streams_close_orphaned() == 2
    assert streams_close_orphaned() == 0  # idempotent
    statuses = {m.pk: (m.status, m.content) for m in Message.objects.filter(role="assistant")}
    assert statuses[dead_unclaimed.pk] == ("interrupted", "half an ans")
    assert statuses[dead_claimed.pk][0] == "interrupted"
    assert statuses[alive.pk][0] == "streaming"


@pytest.mark.django_db
def test_audit_events_past_retention_are_pruned(owner, settings):
    settings.HERMES_AUDIT_RETENTION_DAYS = 30
    old = MemoryEvent.objects.create(
        owner=owner, source="manual", action="add", target="memory", verdict="accepted"
    )
    MemoryEvent.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    recent = MemoryEvent.objects.create(
        owner=owner, source="manual", action="add", target="memory", verdict="accepted"
    )
    assert audit_prune() == 1
    assert list(MemoryEvent.objects.values_list("pk", flat=True)) == [recent.pk]
    settings.HERMES_AUDIT_RETENTION_DAYS = 0
    MemoryEvent.objects.update(created_at=timezone.now() - timedelta(days=3650))
    assert audit_prune() == 0


@pytest.mark.django_db
def test_expire_removes_expired_login_sessions_and_finished_lockouts(owner):
    live = SessionStore()
    live["x"] = 1
    live.create()
    dead = SessionStore()
    dead["x"] = 1
    dead.create()
    LoginSession.objects.filter(pk=dead.session_key).update(
        expire_date=timezone.now() - timedelta(days=1)
    )
    long_ago = timezone.now() - timedelta(days=1)
    LoginThrottle.objects.create(key="ip:old", attempts=3, window_started_at=long_ago)
    LoginThrottle.objects.create(
        key="ip:locked",
        attempts=0,
        window_started_at=long_ago,
        locked_until=timezone.now() + timedelta(minutes=5),
    )
    from core.tasks import expire

    result = expire.apply().get()
    assert result == {"login_sessions": 1, "login_throttle": 1}
    assert LoginSession.objects.filter(pk=live.session_key).exists()
    assert list(LoginThrottle.objects.values_list("key", flat=True)) == ["ip:locked"]


@pytest.mark.django_db(transaction=True)
def test_optimize_runs_on_this_database():
    from django.db import connection

    done = maintenance.database_optimize()
    if connection.vendor == "sqlite":
        assert "PRAGMA optimize" in done
        assert any(step.startswith("fts5 optimize messages_fts") for step in done)
    else:
        assert done == ["VACUUM (ANALYZE)"]


@pytest.mark.slow
def test_the_real_worker_runs_the_housekeeping(celery_worker, owner):
    message = orphan(owner)
    result = celery_worker.send("hermes_site.prune")
    wait_for(
        lambda: Message.objects.get(pk=message.pk).status == "interrupted",
        timeout=30,
        what="the worker to prune",
    )
    optimize = celery_worker.send("hermes_site.optimize_database")
    wait_for(
        lambda: (
            f"hermes_site.optimize_database[{optimize.id}] succeeded"
            in celery_worker.log.read_text()
        ),
        timeout=60,
        what="the worker to optimize the database",
    )
    assert f"hermes_site.prune[{result.id}] succeeded" in celery_worker.log.read_text()
