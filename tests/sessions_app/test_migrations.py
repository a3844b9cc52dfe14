"""Every migration applies and reverses, FTS objects included, on the current vendor."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from sessions_app.models import Message, Session
from sessions_app.selectors import message_ids_matching


def fts_objects() -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE name LIKE 'messages_fts%%'")
        else:
            cursor.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'sessions_app_message' AND column_name = 'search_vector' "
                "UNION SELECT indexname FROM pg_indexes WHERE indexname LIKE 'message_%%_idx'"
                " AND indexname IN ('message_search_vector_idx', 'message_content_trgm_idx')"
            )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_all_migrations_reverse_to_zero_and_apply_again(owner):
    assert fts_objects()
    Session.objects.all().delete()
    call_command("migrate", "sessions_app", "zero", verbosity=0)
    assert fts_objects() == set()
    assert "sessions_app_message" not in connection.introspection.table_names()
    call_command("migrate", verbosity=0)
    assert fts_objects()
    session = Session.objects.create(owner=owner)
    msg = Message.objects.create(session=session, role="user", content="roundtripword")
    assert message_ids_matching(owner=owner, fts_query="roundtripword") == [msg.id]
