"""The full-text indexes follow every insert, edit and delete of a message."""

from __future__ import annotations

import pytest
from django.db import connection

from sessions_app.models import Message, Session
from sessions_app.selectors import message_ids_matching

pytestmark = pytest.mark.django_db


def words(owner, query):
    return message_ids_matching(owner=owner, fts_query=query, index="words")


def trigram(owner, query):
    return message_ids_matching(owner=owner, fts_query=query, index="trigram")


def integrity_check() -> None:
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for table in ("messages_fts", "messages_fts_trigram"):
            cursor.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")


@pytest.fixture
def chat(owner):
    return Session.objects.create(owner=owner, title="Deploy script")


def test_inserted_message_is_found_then_edit_and_delete_remove_it(owner, chat):
    msg = Message.objects.create(session=chat, role="user", content="the zephyrine deploy")
    assert words(owner, "zephyrine") == [msg.id]

    msg.content = "the quokkalith deploy"
    msg.save()
    assert words(owner, "zephyrine") == []
    assert words(owner, "quokkalith") == [msg.id]

    msg.delete()
    assert words(owner, "quokkalith") == []
    integrity_check()


def test_tool_call_arguments_and_tool_name_are_searchable(owner, chat):
    call = Message.objects.create(
        session=chat,
        role="assistant",
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "memory", "arguments": '{"content": "flibbertigibbet"}'},
            }
        ],
        status="complete",
    )
    result = Message.objects.create(
        session=chat,
        role="tool",
        tool_call_id="call_1",
        tool_name="session_search",
        content="ok",
    )
    assert words(owner, "flibbertigibbet") == [call.id]
    assert words(owner, "session_search") == [result.id]


def test_long_tool_output_is_indexed_up_to_8192_characters(owner, chat):
    text = "filler " * 1200 + "lateword"  # past the 8,192-character cut
    msg = Message.objects.create(
        session=chat, role="tool", tool_call_id="c", tool_name="t", content=text
    )
    assert words(owner, "filler") == [msg.id]
    assert words(owner, "lateword") == []


def test_trigram_index_finds_cjk_and_substrings_but_skips_tool_rows(owner, chat):
    msg = Message.objects.create(session=chat, role="user", content="我们讨论了部署脚本的问题")
    Message.objects.create(
        session=chat, role="tool", tool_call_id="c", tool_name="t", content="部署脚本的输出"
    )
    assert trigram(owner, "部署脚本") == [msg.id]


def test_another_users_messages_never_match(owner, outsider, chat):
    theirs = Session.objects.create(owner=outsider)
    Message.objects.create(session=theirs, role="user", content="oscarsecretword")
    assert words(owner, "oscarsecretword") == []
    assert trigram(owner, "oscarsecretword") == []
    assert len(words(outsider, "oscarsecretword")) == 1


def test_integrity_check_passes_after_a_mixed_workload(owner, chat):
    msgs = [
        Message.objects.create(session=chat, role="user", content=f"alpha {i} beta")
        for i in range(40)
    ]
    for m in msgs[::3]:
        m.content = m.content + " gamma"
        m.save()
    for m in msgs[::5]:
        m.delete()
    Message.objects.filter(id__in=[m.id for m in msgs[1::7]]).update(content="delta")
    integrity_check()
    remaining_gamma = Message.objects.filter(content__contains="gamma").count()
    assert len(words(owner, "gamma")) == remaining_gamma
    assert len(words(owner, "delta")) == Message.objects.filter(content="delta").count()
