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


def stem_objects() -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE name LIKE 'messages_fts_stem%%'"
                " OR name LIKE 'sessions_title_fts%%'"
            )
        else:
            cursor.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'sessions_app_message' AND column_name = 'stem_vector' "
                "UNION SELECT indexname FROM pg_indexes"
                " WHERE indexname IN ('message_stem_vector_idx', 'session_title_search_idx')"
            )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_the_stemmed_and_title_indexes_build_on_existing_data_and_reverse(owner, outsider):
    from sessions_app.search.service import search_conversations

    def found(user, query):
        return [c.session_id for c in search_conversations(owner=user, query=query).conversations]

    assert len(stem_objects()) >= 3
    call_command("migrate", "sessions_app", "0009_session_and_summary_leases", verbosity=0)
    assert stem_objects() == set()
    # Data written while only the exact indexes exist (no stem triggers to fill anything).
    chat = Session.objects.create(owner=owner, title="Lisbon trams")
    Message.objects.create(session=chat, role="user", content="we camped by the castle")
    theirs = Session.objects.create(owner=outsider, title="Porto trams")
    Message.objects.create(session=theirs, role="user", content="camped too")
    assert message_ids_matching(owner=owner, fts_query="camped")  # exact search still works

    call_command("migrate", verbosity=0)  # every app: a step back also unapplies dependents
    assert len(stem_objects()) >= 3
    # Back-filled: the stem of old rows and the title of an old conversation are found.
    assert found(owner, "camping") == [chat.id]
    assert found(owner, "tram") == [chat.id]
    assert found(outsider, "tram") == [theirs.id]
    # And kept in sync from now on.
    later = Message.objects.create(session=chat, role="assistant", content="the hikers hiked")
    assert later.id in [h.message_id for h in _hits(owner, "hiking")]
    later.delete()
    assert _hits(owner, "hiking") == []


def _hits(owner, query):
    from sessions_app.search.backends import find_hits
    from sessions_app.search.sanitize import parse_query

    return find_hits(owner_id=owner.pk, query=parse_query(query)).hits


def cjk_objects() -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE name LIKE 'messages_fts_cjk%%'"
                " OR name = 'messages_fts_positions'"
            )
        else:
            cursor.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'sessions_app_message' AND column_name = 'cjk_vector' "
                "UNION SELECT indexname FROM pg_indexes WHERE indexname = 'message_cjk_vector_idx'"
                " UNION SELECT proname FROM pg_proc WHERE proname = 'hermes_cjk_grams'"
            )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_the_cjk_index_builds_on_existing_data_stays_in_sync_and_reverses(owner, outsider):
    assert len(cjk_objects()) >= 3
    call_command("migrate", "sessions_app", "0010_stemmed_and_title_search", verbosity=0)
    assert cjk_objects() == set()
    chat = Session.objects.create(owner=owner)
    old = Message.objects.create(session=chat, role="user", content="把Kafka部署到生产环境")
    theirs = Session.objects.create(owner=outsider)
    Message.objects.create(session=theirs, role="user", content="部署完成")

    call_command("migrate", verbosity=0)  # every app: a step back also unapplies dependents
    assert len(cjk_objects()) >= 3
    assert [h.message_id for h in _hits(owner, "部署")] == [old.id]  # back-filled, scoped
    assert [h.message_id for h in _hits(owner, "kafka 生产环境")] == [old.id]

    old.content = "计划取消了"
    old.save(update_fields=["content"])
    assert _hits(owner, "部署") == []
    assert [h.message_id for h in _hits(owner, "取消")] == [old.id]
    old.delete()
    assert _hits(owner, "取消") == []

    call_command("migrate", "sessions_app", "0010_stemmed_and_title_search", verbosity=0)
    assert cjk_objects() == set()
    call_command("migrate", verbosity=0)  # every app: a step back also unapplies dependents
