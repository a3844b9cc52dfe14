"""The chat sidebar's pages (chat/list/): the first page on the chat page, the next ones as
JSON for scrolling and the filter, always only the person's own conversations."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from sessions_app.models import Session

pytestmark = pytest.mark.django_db


def conversations(owner, count: int, prefix: str = "Chat") -> list[Session]:
    """`count` conversations, the first one the latest."""
    now = timezone.now()
    return Session.objects.bulk_create(
        Session(owner=owner, title=f"{prefix} {i}", last_activity_at=now - timedelta(minutes=i))
        for i in range(count)
    )


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_chat_page_renders_the_first_page_pinned_first(owner):
    conversations(owner, 60)
    Session.objects.filter(title="Chat 59").update(pinned=True)
    html = logged_in(owner).get("/chat/").content.decode()
    assert html.count('class="conv"') == 50
    assert html.index("Chat 59") < html.index("Chat 0")
    assert 'data-next-offset="50"' in html


def test_the_next_pages_follow_without_gaps_or_repeats(owner):
    conversations(owner, 120)
    client = logged_in(owner)
    first = client.get("/chat/list/").json()
    second = client.get("/chat/list/", {"offset": first["next_offset"]}).json()
    third = client.get("/chat/list/", {"offset": second["next_offset"]}).json()
    titles = [i["title"] for page in (first, second, third) for i in page["items"]]
    assert titles == [f"Chat {i}" for i in range(120)]
    assert (first["next_offset"], second["next_offset"], third["next_offset"]) == (50, 100, None)
    assert first["items"][0]["url"] == f"/chat/{first['items'][0]['id']}/"


def test_another_persons_conversations_never_appear(owner, outsider):
    conversations(outsider, 70, prefix="Secret")
    conversations(owner, 3)
    client = logged_in(owner)
    page = client.get("/chat/list/").json()
    assert [i["title"] for i in page["items"]] == ["Chat 0", "Chat 1", "Chat 2"]
    assert page["next_offset"] is None
    assert client.get("/chat/list/", {"q": "Secret"}).json() == {"items": [], "next_offset": None}
    assert client.get("/chat/list/", {"offset": 0, "q": "Chat"}).json()["items"][0]["title"] == (
        "Chat 0"
    )


def test_the_filter_searches_every_title_case_insensitively(owner):
    conversations(owner, 200)
    Session.objects.filter(title="Chat 180").update(title="Deploy the Debian box")
    page = logged_in(owner).get("/chat/list/", {"q": "debian"}).json()
    assert [i["title"] for i in page["items"]] == ["Deploy the Debian box"]


def test_the_list_needs_a_login_and_tolerates_a_bad_offset(owner):
    assert Client().get("/chat/list/").status_code == 302
    conversations(owner, 2)
    assert len(logged_in(owner).get("/chat/list/", {"offset": "x"}).json()["items"]) == 2
