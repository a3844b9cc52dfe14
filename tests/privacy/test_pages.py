"""The pages a person uses: the Account page's data section, the Usage page with its charts,
and the conversation inspector."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from memory.models import MemoryEvent
from sessions_app.models import Message, Session
from tests.privacy.conftest import login, seed

pytestmark = pytest.mark.django_db


def test_account_page_offers_export_import_forget_and_delete(owner, settings):
    settings.HERMES_TEMPORARY_CHAT_DAYS = 3
    seed(owner, "olv")
    response = login(owner).get(reverse("account"))
    body = response.content.decode()
    for text in (
        "Download my data",
        "Import from Hermes",
        "Forget all memory",
        "Delete my account",
        "deleted 3 days after they start",
        'name="memory_enabled"',
    ):
        assert text in body, text
    assert 'type="password" name="password"' in body
    assert "style=" not in body and "<script>" not in body  # CSP: no inline code


def section_html(page: str, section_id: str) -> str:
    match = re.search(rf'<section class="[^"]*" id="{section_id}">(.*?)</section>', page, re.S)
    assert match, section_id
    return match.group(1)


@pytest.mark.parametrize(
    ("url", "data", "section", "text"),
    [
        ("account_delete", {"password": "wrong"}, "delete", "That is not your password."),
        ("account_forget_memory", {}, "memory-forget", "Tick the box"),
        ("account_import", {}, "data", "Choose a zip"),
    ],
    ids=["delete", "forget", "import"],
)
def test_an_account_action_shows_its_message_in_the_section_it_jumps_to(
    owner, url, data, section, text
):
    client = login(owner)
    response = client.post(reverse(url), data)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/#")
    page = client.get(response["Location"]).content.decode()
    assert text in section_html(page, section)
    assert page.count(text) == 1  # not at the top of the page as well


def add_usage(session: Session, *, model: str, days_ago: int, prompt: int, cached: int) -> None:
    Message.objects.create(
        session=session,
        role="assistant",
        status="complete",
        content="ok",
        model=model,
        prompt_tokens=prompt,
        cached_tokens=cached,
        completion_tokens=50,
        cost_usd=Decimal("0.0100"),
        timestamp=timezone.now() - timedelta(days=days_ago),
    )


def test_usage_page_draws_tokens_cost_and_cache_rate_per_day_and_model(owner, outsider):
    session = Session.objects.create(owner=owner, title="work")
    add_usage(session, model="gpt-a", days_ago=0, prompt=1000, cached=750)
    add_usage(session, model="gpt-b", days_ago=2, prompt=400, cached=0)
    other = Session.objects.create(owner=outsider, title="theirs")
    add_usage(other, model="secret-model-x", days_ago=0, prompt=999999, cached=0)
    body = login(owner).get(reverse("usage")).content.decode()
    assert body.count("<svg") >= 4
    assert "gpt-a" in body and "gpt-b" in body and "secret-model-x" not in body
    assert "1,500" in body  # tokens: 1,400 prompt + 100 answer
    assert "54%" in body  # 750 cached of 1,400 prompt tokens
    assert "Per person" not in body
    assert not re.search(r'(src|href)="(https?:)?//', body)


def test_usage_page_for_superusers_adds_people(superuser, owner):
    add_usage(
        Session.objects.create(owner=owner, title="w"), model="m", days_ago=1, prompt=10, cached=5
    )
    body = login(superuser).get(reverse("usage") + "?days=7").content.decode()
    assert "Per person" in body and "olivia" in body


def test_usage_page_without_any_usage_says_so(owner):
    body = login(owner).get(reverse("usage") + "?days=nonsense").content.decode()
    assert "No model calls in the last 30 days" in body


def test_inspector_shows_prompt_memory_skills_recall_tools_flush_and_summary(owner, outsider):
    mine = seed(owner, "olv")
    MemoryEvent.objects.filter(owner=owner).update(session=mine.session)
    client = login(owner)
    body = client.get(reverse("session_inspect", args=[mine.session.pk])).content.decode()
    m = mine.markers
    for key in ("prompt", "memory", "usermemory", "recall", "toolargs", "toolresult", "assistant"):
        assert m[key] in body, key
    assert "deploy-olv" in body  # the skill the prompt listed
    assert "Compression" in body and m["pending"] in body  # the flush saved this
    assert m["summary"] in body  # what the next part continues from
    child = client.get(reverse("session_inspect", args=[mine.continuation.pk])).content.decode()
    assert "Continued from a compression summary" in child and m["summary"] in child
    assert client.get(reverse("chat_session", args=[mine.continuation.pk])).status_code == 200
    stranger = login(outsider).get(reverse("session_inspect", args=[mine.session.pk]))
    assert stranger.status_code == 404


def test_chat_page_links_to_the_inspector(owner):
    session = Session.objects.create(owner=owner, title="x")
    body = login(owner).get(reverse("chat_session", args=[session.pk])).content.decode()
    assert reverse("session_inspect", args=[session.pk]) in body
