"""Memory's migrations reverse and apply again with data in the tables, and the entry table
keeps the trigger that releases a deleted entry's references (a SQLite table rebuild drops
it; 0005_import_review_source creates it again in both directions)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from memory.models import MemoryEntry, MemoryEvent, Source
from memory.services import Provenance, memory_add, memory_entry_delete


def release_trigger_exists() -> bool:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'trigger' "
                "AND name = 'memory_entry_release'"
            )
        else:
            cursor.execute("SELECT 1 FROM pg_trigger WHERE tgname = 'memory_entry_release'")
        return cursor.fetchone() is not None


@pytest.mark.django_db(transaction=True)
def test_the_import_review_source_reverses_to_review_and_applies_again(owner):
    learned = Provenance(source=Source.IMPORT_REVIEW, client="7")
    kept = memory_add(user=owner, target="user", content="Keeps bees", provenance=learned)
    memory_add(user=owner, target="memory", content="Uses vim", provenance=Provenance())
    assert release_trigger_exists()
    try:
        call_command("migrate", "memory", "0004_entry_release", verbosity=0)
        assert release_trigger_exists()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT source, source_client FROM memory_memoryentry WHERE id = %s",
                [kept.entries[0].pk],
            )
            assert cursor.fetchone() == ("review", "")
            cursor.execute(
                "SELECT DISTINCT source FROM memory_memoryevent WHERE owner_id = %s "
                "ORDER BY source",
                [owner.pk],
            )
            assert [row[0] for row in cursor.fetchall()] == ["manual", "review"]
    finally:
        call_command("migrate", "memory", verbosity=0)
    assert release_trigger_exists()
    # The write path's one-statement delete still leaves the audit events whole.
    entry = MemoryEntry.objects.get(owner=owner, content="Uses vim")
    memory_entry_delete(user=owner, entry_id=entry.pk)
    assert not MemoryEntry.objects.filter(pk=entry.pk).exists()
    assert MemoryEvent.objects.filter(owner=owner, before="Uses vim", entry=None).exists()
    again = memory_add(user=owner, target="user", content="Sells honey", provenance=learned)
    assert again.entries[0].source == "import_review"
