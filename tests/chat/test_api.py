"""The conversations REST API: owner-scoped, with query counts pinned on lists."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Message, Session

pytestmark = pytest.mark.django_db


def api(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def conversation(owner):
    session = Session.objects.create(owner=owner, title="Olivia's plans")
    Message.objects.create(session=session, role="user", content="first")
    Message.objects.create(session=session, role="assistant", status="complete", content="second")
    return session


def test_list_detail_and_messages(owner, conversation):
    client = api(owner)
    listing = client.get("/api/sessions/").json()
    assert [s["id"] for s in listing["results"]] == [conversation.pk]
    detail = client.get(f"/api/sessions/{conversation.pk}/").json()
    assert detail["title"] == "Olivia's plans" and detail["message_count"] == 0
    messages = client.get(f"/api/sessions/{conversation.pk}/messages/").json()["results"]
    assert [m["content"] for m in messages] == ["first", "second"]
    newer = client.get(f"/api/sessions/{conversation.pk}/messages/?after={messages[0]['id']}")
    assert [m["content"] for m in newer.json()["results"]] == ["second"]


def test_patch_renames_pins_and_delete_removes(owner, conversation):
    client = api(owner)
    response = client.patch(
        f"/api/sessions/{conversation.pk}/",
        {"title": "Renamed", "pinned": True},
        content_type="application/json",
    )
    assert response.status_code == 200
    assert response.json()["title"] == "Renamed" and response.json()["pinned"] is True
    assert client.delete(f"/api/sessions/{conversation.pk}/").status_code == 204
    assert not Session.objects.filter(pk=conversation.pk).exists()


def test_another_user_gets_404_on_every_conversation_endpoint(outsider, conversation):
    client = api(outsider)
    sid = conversation.pk
    for response in (
        client.get(f"/api/sessions/{sid}/"),
        client.get(f"/api/sessions/{sid}/messages/"),
        client.patch(f"/api/sessions/{sid}/", {"title": "x"}, content_type="application/json"),
        client.delete(f"/api/sessions/{sid}/"),
    ):
        assert response.status_code == 404
        assert "Olivia" not in response.content.decode()
        assert response.json()["error"]["code"] == "not_found"
    assert client.get("/api/sessions/").json()["results"] == []
    assert Session.objects.get(pk=sid).title == "Olivia's plans"


def test_session_list_query_count_does_not_grow_with_sessions(owner):
    for i in range(3):
        Session.objects.create(owner=owner, title=f"s{i}")
    client = api(owner)
    client.get("/api/sessions/")  # the first request records the browser's language once
    with CaptureQueriesContext(connection) as few:
        client.get("/api/sessions/")
    for i in range(3, 20):
        Session.objects.create(owner=owner, title=f"s{i}")
    with CaptureQueriesContext(connection) as many:
        client.get("/api/sessions/")
    assert len(many) == len(few)
