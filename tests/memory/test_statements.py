"""Statement budget of one memory write: at most five, the audit row, BEGIN and COMMIT
included, on both vendors (issue 19). Counted through the services with the queries
Django sends, outside any test transaction so the write's own BEGIN/COMMIT are real."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory import services
from memory.models import MemoryEntry, MemoryEvent, Source
from memory.services import Provenance
from tests.memory.conftest import chat_of, contents, set_profile

pytestmark = pytest.mark.django_db(transaction=True)

BUDGET = 5


def _statements(call, **kwargs) -> list[str]:
    assert connection.get_autocommit(), "the write must run its own transaction"
    with CaptureQueriesContext(connection) as ctx:
        call(**kwargs)
    sql = [q["sql"] for q in ctx.captured_queries]
    assert sql[0].startswith("BEGIN") and sql[-1] == "COMMIT", sql
    return sql


@pytest.fixture
def seeded(owner):
    for i in range(5):
        services.memory_add(user=owner, target="memory", content=f"Standing fact {i}")
    return owner


def test_add_fits_the_statement_budget(seeded):
    sql = _statements(services.memory_add, user=seeded, target="memory", content="New fact")
    assert len(sql) <= BUDGET, "\n".join(sql)
    assert contents(seeded)[-1] == "New fact"
    assert MemoryEvent.objects.filter(owner=seeded, action="add", after="New fact").exists()


def test_replace_fits_the_statement_budget(seeded):
    sql = _statements(
        services.memory_replace,
        user=seeded,
        target="memory",
        old_text="Standing fact 2",
        content="Changed fact",
    )
    assert len(sql) <= BUDGET, "\n".join(sql)
    assert "Changed fact" in contents(seeded)
    assert "Standing fact 2" not in contents(seeded)
    assert MemoryEvent.objects.filter(owner=seeded, action="replace", after="Changed fact").exists()


def test_remove_fits_the_statement_budget(seeded):
    sql = _statements(
        services.memory_remove, user=seeded, target="memory", old_text="Standing fact 3"
    )
    assert len(sql) <= BUDGET, "\n".join(sql)
    assert "Standing fact 3" not in contents(seeded)
    assert MemoryEvent.objects.filter(
        owner=seeded, action="remove", before="Standing fact 3"
    ).exists()


def test_a_removed_entry_leaves_its_history_and_takes_its_proposals(owner):
    """The one-statement DELETE releases what Django's collector used to: the snapshots
    that showed the entry lose the link, its audit events keep their text, and the agent's
    pending proposals to change it go. Committed, so the foreign keys are checked."""
    services.memory_add(user=owner, target="memory", content="Likes trains")
    entry = MemoryEntry.objects.get(owner=owner)
    chat = chat_of(owner)
    services.memory_snapshot_freeze(session=chat)
    set_profile(owner, memory_write_approval=True)
    services.memory_replace(
        user=owner,
        target="memory",
        old_text="trains",
        content="Likes fast trains",
        provenance=Provenance(source=Source.TOOL, session_id=chat.pk),
    )
    assert MemoryEntry.objects.filter(pending_of=entry).exists()

    services.memory_entry_delete(user=owner, entry_id=entry.pk)

    assert not MemoryEntry.objects.filter(owner=owner).exists()
    snapshot = chat.memory_snapshots.get()
    assert list(snapshot.entries.all()) == []
    assert "Likes trains" in snapshot.rendered
    added = MemoryEvent.objects.get(owner=owner, action="add")
    assert (added.entry_id, added.after) == (None, "Likes trains")
    assert not MemoryEvent.objects.filter(entry__isnull=False).exists()
    assert MemoryEvent.objects.filter(owner=owner, action="remove", before="Likes trains").exists()
