"""The 403, 404, 405 and 500 pages are the site's own: its layout, a heading that says what
happened, the right status. The 500 page renders with DEBUG off, without a request context
or a database (they may be what failed)."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.test import Client
from django.urls import include, path

pytestmark = pytest.mark.django_db


def forbidden(request: HttpRequest) -> HttpResponse:
    raise PermissionDenied


def broken(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug")


urlpatterns = [
    path("test/forbidden/", forbidden),
    path("test/broken/", broken),
    path("", include("hermes_site.urls")),
]


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def heading(response: HttpResponse) -> str:
    match = re.search(r"<h1>(.*?)</h1>", response.content.decode())
    assert match, response.content.decode()
    return match.group(1)


def test_a_missing_skill_is_the_sites_404_page_with_its_navigation(owner):
    response = logged_in(owner).get("/skills/nonexistent/")
    assert response.status_code == 404
    assert heading(response) == "Page not found"
    page = response.content.decode()
    assert 'class="mainnav"' in page and "app.css" in page


def test_a_get_on_a_post_only_url_is_a_styled_405_that_keeps_allow(owner):
    response = logged_in(owner).get("/accounts/forget-memory/")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert heading(response) == "This address only takes a form"
    assert 'class="mainnav"' in response.content.decode()


def test_the_api_keeps_its_json_405(owner):
    response = logged_in(owner).put("/api/me/")
    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.urls(__name__)
def test_permission_denied_is_the_sites_403_page(owner):
    response = logged_in(owner).get("/test/forbidden/")
    assert response.status_code == 403
    assert heading(response) == "Not allowed"
    assert 'class="mainnav"' in response.content.decode()


@pytest.mark.urls(__name__)
def test_an_unexpected_error_is_the_sites_500_page_with_debug_off(owner, settings):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    response = client.get("/test/broken/")
    assert response.status_code == 500
    assert heading(response) == "Something went wrong"
    assert "a bug" not in response.content.decode()


def test_the_500_page_needs_neither_a_request_nor_the_database(django_assert_num_queries):
    with django_assert_num_queries(0):
        page = render_to_string("500.html")  # no request, as Django's handler renders it
    assert "<h1>Something went wrong</h1>" in page and "app.css" in page
