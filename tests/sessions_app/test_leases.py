"""Leases (core/leases.py) on the conversation (sessions_app/turn_claim.py) and on the other
kinds of work: one holder at a time, renewals, takeovers of expired and dead holders, and
what a process does with the leases of dead processes when it starts."""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import leases
from sessions_app import turn_claim
from sessions_app.models import Message, Session
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(owner: Any) -> Session:
    return SessionFactory(owner=owner, title="Leased")


def owner_of(session: Session) -> str:
    return Session.objects.get(pk=session.pk).lease_owner


def dead_owner(kind: str) -> str:
    """The owner string of a process of this host that has exited."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return f"{kind}@{leases.process_id().rsplit(':', 1)[0]}:{proc.stdout.strip()}#dead"


def test_a_free_conversation_is_leased_once(session: Session) -> None:
    lease = turn_claim.acquire_for_turn(session_id=session.pk)
    assert lease is not None and owner_of(session) == lease.owner
    assert lease.owner.startswith(f"turn@{leases.process_id()}#")
    assert turn_claim.acquire_for_turn(session_id=session.pk) is None
    assert turn_claim.acquire_for_compression(session_id=session.pk) is None
    assert turn_claim.holder_kind(session_id=session.pk) == "turn"


def test_a_lease_writes_its_values_and_counters_in_its_update(session: Session) -> None:
    Session.objects.filter(pk=session.pk).update(message_count=4)
    when = timezone.now() - timedelta(hours=1)
    lease = turn_claim.acquire_for_turn(
        session_id=session.pk, values={"last_activity_at": when}, increments={"message_count": 2}
    )
    stored = Session.objects.get(pk=session.pk)
    assert lease is not None and stored.lease_owner == lease.owner
    assert stored.message_count == 6 and stored.last_activity_at == when
    # Refused (held): nothing moves.
    assert (
        turn_claim.acquire_for_turn(session_id=session.pk, increments={"message_count": 2}) is None
    )
    assert Session.objects.get(pk=session.pk).message_count == 6
    lease.release()
    # A part a compression ended is not leased, and its counters stay.
    Session.objects.filter(pk=session.pk).update(end_reason=Session.EndReason.COMPRESSION)
    assert (
        turn_claim.acquire_for_turn(session_id=session.pk, increments={"message_count": 2}) is None
    )
    assert Session.objects.get(pk=session.pk).message_count == 6


def test_a_lease_refuses_an_expression_among_its_values(session: Session) -> None:
    from django.db.models import F

    held = set(leases._held)
    with pytest.raises(TypeError, match="increments"):
        turn_claim.acquire_for_turn(
            session_id=session.pk, values={"message_count": F("message_count") + 1}
        )
    assert owner_of(session) == "" and leases._held == held  # no owner was made for it


def test_a_new_chats_conversation_is_inserted_leased_for_its_first_turn(owner: Any) -> None:
    started = turn_claim.open_for_turn(owner=owner, title="New", message_count=2)
    session, lease = started
    assert owner_of(session) == lease.owner and lease.owner.startswith("turn@")
    # Held by this live process: nobody takes it over, and it is listed as held.
    assert not leases.owner_is_dead_here(lease.owner)
    assert turn_claim.acquire_for_turn(session_id=session.pk) is None
    assert turn_claim.holder_kind(session_id=session.pk) == "turn"
    assert any(h.owner == lease.owner for h in leases.leases_held())
    assert lease.release() and owner_of(session) == ""
    assert turn_claim.acquire_for_turn(session_id=session.pk) is not None


def test_an_insert_that_fails_holds_no_lease(owner: Any) -> None:
    taken = SessionFactory(owner=owner, title="Taken")
    held = set(leases._held)
    with pytest.raises(IntegrityError), transaction.atomic():
        turn_claim.open_for_turn(id=taken.pk, owner=owner, title="Again")
    # The owner it made is forgotten: this process does not count it among its own.
    assert leases._held == held


def test_a_release_after_a_takeover_frees_nothing(session: Session, settings: Any) -> None:
    first = turn_claim.acquire_for_turn(session_id=session.pk)
    Session.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now())
    second = turn_claim.acquire_for_turn(session_id=session.pk)
    assert second is not None and second.took_over == first.owner
    assert not first.release() and not first.renew() and first.lost.is_set()
    assert owner_of(session) == second.owner
    assert second.release() and owner_of(session) == ""


def test_renewal_keeps_a_lease_alive_and_expiry_lets_the_next_one_in(
    session: Session, settings: Any, caplog: Any
) -> None:
    settings.HERMES_LEASE_SECONDS = 5
    lease = turn_claim.acquire_for_compression(session_id=session.pk)
    assert turn_claim.is_compressing(session_id=session.pk)
    assert 4 < leases.lease_remaining(Session, session.pk) <= 5
    Session.objects.filter(pk=session.pk).update(
        lease_expires_at=timezone.now() + timedelta(seconds=1)
    )
    assert lease.renew() and leases.lease_remaining(Session, session.pk) > 4
    Session.objects.filter(pk=session.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert not turn_claim.is_compressing(session_id=session.pk)
    with caplog.at_level(logging.WARNING, logger="core.leases"):
        taken = turn_claim.acquire_for_turn(session_id=session.pk)
    assert taken is not None and taken.took_over == lease.owner
    assert "lease taken over: turn" in caplog.text and lease.owner in caplog.text


def test_a_lease_of_a_dead_process_of_this_host_is_taken_over_at_once(session: Session) -> None:
    dead = dead_owner("compress")
    Session.objects.filter(pk=session.pk).update(
        lease_owner=dead, lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    assert leases.lease_remaining(Session, session.pk) == 0
    lease = turn_claim.acquire_for_turn(session_id=session.pk)
    assert lease is not None and lease.took_over == dead


def test_a_lease_of_another_host_waits_for_its_expiry(session: Session) -> None:
    Session.objects.filter(pk=session.pk).update(
        lease_owner="turn@elsewhere:1#x", lease_expires_at=timezone.now() + timedelta(seconds=30)
    )
    assert turn_claim.acquire_for_turn(session_id=session.pk) is None
    assert turn_claim.holder_kind(session_id=session.pk) == "turn"


def test_an_ended_conversation_is_not_compressed(session: Session) -> None:
    Session.objects.filter(pk=session.pk).update(ended_at=timezone.now())
    assert turn_claim.acquire_for_compression(session_id=session.pk) is None


def test_startup_releases_dead_leases_and_interrupts_their_answers(
    session: Session, owner: Any
) -> None:
    other = SessionFactory(owner=owner, title="Alive elsewhere")
    answer = Message.objects.create(
        session=session, role="assistant", status="streaming", content="half an ans"
    )
    kept = Message.objects.create(
        session=other, role="assistant", status="streaming", content="still going"
    )
    soon = timezone.now() + timedelta(minutes=5)
    Session.objects.filter(pk=session.pk).update(lease_owner=dead_owner("turn"),
                                                 lease_expires_at=soon)  # fmt: skip
    Session.objects.filter(pk=other.pk).update(lease_owner="turn@elsewhere:1#x",
                                               lease_expires_at=soon)  # fmt: skip
    held = {h.pk: h for h in leases.leases_held()}
    assert set(held) == {session.pk, other.pk} and held[session.pk].kind == "turn"
    assert leases.leases_recover_dead() == {"turn": 1}
    answer.refresh_from_db()
    kept.refresh_from_db()
    assert (answer.status, answer.content) == ("interrupted", "half an ans")
    assert kept.status == "streaming"
    assert [h.pk for h in leases.leases_held()] == [other.pk]


def test_an_answer_a_dead_holder_had_not_started_is_failed_not_interrupted(
    session: Session,
) -> None:
    # Found by the chaos suite: daphne killed before the first delta left an empty answer
    # "interrupted"; a broken-off answer without text is "failed", as a live turn marks it.
    empty = Message.objects.create(session=session, role="assistant", status="streaming")
    Session.objects.filter(pk=session.pk).update(
        lease_owner=dead_owner("turn"), lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    assert leases.leases_recover_dead() == {"turn": 1}
    empty.refresh_from_db()
    assert (empty.status, empty.content, empty.finish_reason) == ("failed", "", "process_died")
    other = Message.objects.create(session=session, role="assistant", status="streaming")
    assert turn_claim.answers_close_abandoned(session_id=session.pk) == 1
    other.refresh_from_db()
    assert other.status == "failed"


def test_the_leases_command_lists_what_is_held(session: Session) -> None:
    import io

    from django.core.management import call_command

    lease = turn_claim.acquire_for_turn(session_id=session.pk)
    out = io.StringIO()
    call_command("leases", stdout=out)
    line = out.getvalue().strip()
    assert line.startswith(f"turn\tsessions_app.Session\t{session.pk}\t{lease.owner}\t")
    assert line.endswith("s left")


def test_work_whose_task_the_broker_lost_is_sent_again_once_it_waited(
    owner: Any, settings: Any, tmp_path: Any
) -> None:
    from privacy.models import ExportJob

    settings.HERMES_EXPORT_DIR = str(tmp_path)
    settings.HERMES_REQUEUE_SECONDS = 60
    lost = ExportJob.objects.create(owner=owner)
    ExportJob.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(minutes=2))
    dead_build = ExportJob.objects.create(owner=owner)
    ExportJob.objects.filter(pk=dead_build.pk).update(
        status="running",
        lease_owner="export@elsewhere:1#x",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    just_queued = ExportJob.objects.create(owner=owner)
    building = ExportJob.objects.create(owner=owner)
    ExportJob.objects.filter(pk=building.pk).update(
        status="running",
        lease_owner="export@elsewhere:1#y",
        lease_expires_at=timezone.now() + timedelta(minutes=1),
    )
    # Tasks run inline here: what is sent again is built at once.
    assert leases.leases_requeue_stalled() == {"export": 2}
    statuses = dict(ExportJob.objects.values_list("pk", "status"))
    assert statuses == {
        lost.pk: "done",
        dead_build.pk: "done",
        just_queued.pk: "queued",
        building.pk: "running",
    }
    assert len(list(tmp_path.glob("*.zip"))) == 2
    assert leases.leases_requeue_stalled() == {}
