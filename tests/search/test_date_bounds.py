"""Day filters at the ends of the calendar: `until=9999-12-31` once overflowed datetime
(a 500); the API now answers 400 and the Sessions page shows the reason."""

from __future__ import annotations

import pytest
from django.test import Client

from .conftest import make_chat

pytestmark = pytest.mark.django_db

EXTREMES = [
    {"until": "9999-12-31"},
    {"since": "9999-12-31"},
    {"since": "0001-01-01"},
    {"until": "0001-01-01"},
    {"since": "0001-01-01", "until": "9999-12-31"},
]


@pytest.fixture
def owner_api(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


@pytest.mark.parametrize("params", EXTREMES)
def test_search_api_refuses_dates_at_the_ends_of_the_calendar(owner, owner_api, params, no_llm):
    make_chat(owner, [("user", "zebra crossing")])
    response = owner_api.get("/api/search/", {"q": "zebra", **params})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert "between 0001-01-02 and 9999-12-30" in str(error)


@pytest.mark.parametrize("params", EXTREMES)
def test_sessions_page_shows_the_date_error_instead_of_crashing(owner, owner_api, params, no_llm):
    make_chat(owner, [("user", "zebra crossing")])
    response = owner_api.get("/sessions/", {"q": "zebra", **params})
    assert response.status_code == 200
    html = response.content.decode()
    assert "Use a date between 0001-01-02 and 9999-12-30." in html
    # No search ran: no "0 conversations found" under the error.
    assert "zebra crossing" not in html and "conversations found" not in html


def test_the_last_accepted_days_still_search(owner, owner_api, no_llm):
    make_chat(owner, [("user", "zebra crossing")])
    wide = {"q": "zebra", "since": "0001-01-02", "until": "9999-12-30"}
    response = owner_api.get("/api/search/", wide)
    assert response.status_code == 200 and len(response.json()["results"]) == 1
    assert "zebra" in owner_api.get("/sessions/", wide).content.decode()


HUGE = "9" * 30


def test_message_paging_with_an_id_past_any_integer_is_not_a_500(owner, owner_api, no_llm):
    session = make_chat(owner, [("user", "zebra crossing")])
    api = owner_api.get(f"/api/sessions/{session.id}/messages/", {"after": HUGE})
    assert api.status_code == 200 and api.json()["results"] == []
    page = owner_api.get(f"/chat/{session.id}/messages/", {"after": HUGE})
    assert page.status_code == 200 and "zebra crossing" not in page.content.decode()
    sidebar = owner_api.get("/chat/list/", {"offset": HUGE})
    assert sidebar.status_code == 200 and sidebar.json()["items"] == []
