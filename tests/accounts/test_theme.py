"""The theme switch: saved on the profile, rendered on <html data-theme> by the server."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import Profile

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_pages_follow_the_system_until_a_theme_is_chosen(owner):
    client = logged_in(owner)
    assert '<html lang="en" data-theme="system">' in client.get("/chat/").content.decode()
    response = client.post(
        "/accounts/theme/", {"theme": "dark"}, HTTP_REFERER="http://testserver/memory/"
    )
    assert response.status_code == 302 and response.url == "http://testserver/memory/"
    assert Profile.objects.get(user=owner).theme == "dark"
    html = client.get("/chat/").content.decode()
    assert '<html lang="en" data-theme="dark">' in html
    assert 'value="dark" aria-pressed="true"' in html


def test_the_script_gets_no_redirect_and_a_bad_choice_is_refused(owner):
    client = logged_in(owner)
    fetched = client.post("/accounts/theme/", {"theme": "light"}, HTTP_X_REQUESTED_WITH="fetch")
    assert fetched.status_code == 204
    assert client.post("/accounts/theme/", {"theme": "neon"}).status_code == 400
    assert Profile.objects.get(user=owner).theme == "light"


def test_it_never_redirects_off_site_and_changes_only_ones_own_profile(owner, outsider):
    response = logged_in(owner).post(
        "/accounts/theme/", {"theme": "dark"}, HTTP_REFERER="https://evil.example/"
    )
    assert response.url == "/"
    assert not Profile.objects.filter(user=outsider, theme="dark").exists()
    assert Client().post("/accounts/theme/", {"theme": "dark"}).status_code == 302
