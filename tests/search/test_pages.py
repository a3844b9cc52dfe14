"""The Sessions page (/sessions/) and the dashboard's search box."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from sessions_app.models import SearchSummary

from .conftest import compress, make_chat

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner_client(owner):
    client = Client()
    client.force_login(owner)
    return client


def test_login_required():
    response = Client().get("/sessions/")
    assert response.status_code == 302 and "/accounts/login" in response["Location"]


def test_list_shows_each_chain_once_at_its_tip(owner, outsider, owner_client):
    root = make_chat(owner, [("user", "a"), ("assistant", "b")], title="Chained talk")
    tip = compress(root, owner, [("user", "c")])
    make_chat(owner, [("user", "d")], title="Single talk", start=500)
    make_chat(outsider, [("user", "e")], title="Outsider talk")
    html = owner_client.get("/sessions/").content.decode()
    assert html.count("Chained talk") == 1
    assert f'href="/chat/{tip.id}/"' in html
    assert f'href="/chat/{root.id}/"' not in html
    assert "Single talk" in html
    assert "Outsider talk" not in html
    row = re.search(r"Chained talk.*?</tr>", html, re.S).group(0)
    assert "<td>3</td>" in row  # messages across the chain


def test_navigation_links_to_the_page(owner_client):
    assert 'href="/sessions/"' in owner_client.get("/").content.decode()


def test_dashboard_has_a_search_box_that_submits_to_the_page(owner_client):
    html = owner_client.get("/").content.decode()
    form = re.search(r'<form[^>]*action="/sessions/"[^>]*>.*?</form>', html, re.S).group(0)
    assert 'method="get"' in form and 'name="q"' in form


def test_search_groups_and_highlights_safely(owner, owner_client, no_llm):
    make_chat(
        owner,
        [
            ("user", "<script>alert(1)</script> ferret <mark>fake</mark>"),
            ("assistant", "ferret food: \ue000not a marker\ue001"),
        ],
        title="<img src=x onerror=alert(2)>",
    )
    html = owner_client.get("/sessions/", {"q": "ferret"}).content.decode()
    assert "<script>alert(1)</script>" not in html
    # (PostgreSQL's fragment starts at the first word, so the leading "<" may be cut.)
    assert "alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "&lt;mark&gt;fake" in html and "<mark>fake" not in html
    # Our highlight is the only markup around the match; stray marker characters vanish.
    assert html.count("<mark>ferret</mark>") == 2
    assert "\ue000" not in html and "\ue001" not in html
    assert "1 conversation found" in html


def test_no_inline_scripts_or_styles(owner, owner_client, no_llm):
    make_chat(owner, [("user", "ferret")])
    html = owner_client.get("/sessions/", {"q": "ferret"}).content.decode()
    assert re.findall(r"<script(?![^>]*\bsrc=)", html) == []
    assert " style=" not in html
    assert "/static/js/search.js" in html and "/static/css/search.css" in html


def test_filters(owner, owner_client, no_llm):
    make_chat(owner, [("user", "otter question"), ("assistant", "otter answer")])
    html = owner_client.get("/sessions/", {"q": "otter", "role": "assistant"}).content.decode()
    assert "<mark>otter</mark> answer" in html and "<mark>otter</mark> question" not in html
    assert '<option value="assistant" selected>' in html
    html = owner_client.get("/sessions/", {"q": "otter", "since": "2030-01-01"}).content.decode()
    assert "0 conversations found" in html


@pytest.mark.parametrize(
    "params",
    [
        {"q": "otter", "since": "not-a-date"},
        {"q": "otter", "role": "root"},
        {"q": "x" * 10_000},
        {"q": "\x00"},
        {"q": "NEAR("},
        {"q": "🚀"},
        {"page": "abc"},
    ],
)
def test_bad_input_never_breaks_the_page(owner, owner_client, params, no_llm):
    make_chat(owner, [("user", "otter")])
    assert owner_client.get("/sessions/", params).status_code == 200


def test_search_never_shows_other_users_conversations(owner, outsider, owner_client, no_llm):
    make_chat(outsider, [("user", "wombatsecret")], title="Theirs")
    html = owner_client.get("/sessions/", {"q": "wombatsecret"}).content.decode()
    assert "Theirs" not in html and "0 conversations found" in html


def test_summarise_action_without_javascript(
    owner, owner_client, scripted, django_capture_on_commit_callbacks
):
    chat = make_chat(owner, [("user", "lynx tracking notes")], title="Lynx")
    scripted.add_rule("Search topic:", reply="Tracked the lynx.")
    html = owner_client.get("/sessions/", {"q": "lynx"}).content.decode()
    assert 'action="/sessions/summarise/"' in html and "Summarise</button>" in html
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post(
            "/sessions/summarise/", {"q": "lynx", "session_id": chat.id, "role": ""}
        )
    assert response.status_code == 302 and response["Location"] == "/sessions/?q=lynx"
    html = owner_client.get("/sessions/", {"q": "lynx"}).content.decode()
    assert "Tracked the lynx." in html
    assert "Summarise again" in html


def test_summarise_action_on_someone_elses_conversation(owner, outsider, owner_client, scripted):
    theirs = make_chat(outsider, [("user", "lynx")])
    response = owner_client.post(
        "/sessions/summarise/", {"q": "lynx", "session_id": theirs.id}, follow=True
    )
    assert "No such conversation." in response.content.decode()
    assert not SearchSummary.objects.exists()


def test_pending_summary_is_polled_by_the_script(owner, owner_client, scripted):
    chat = make_chat(owner, [("user", "heron")])
    row = SearchSummary.objects.create(
        owner=owner,
        session=chat,
        query="heron",
        query_hash=__import__("sessions_app.search.summarise", fromlist=["x"]).query_hash("heron"),
        last_message_id=chat.messages.get().id,
    )
    html = owner_client.get("/sessions/", {"q": "heron"}).content.decode()
    assert f'data-summary-url="/api/search/summaries/{row.id}/"' in html
    assert 'data-status="pending"' in html
