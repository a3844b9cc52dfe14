from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import ApiToken
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_login_page_logs_in_and_lands_on_the_dashboard(owner):
    client = Client(enforce_csrf_checks=True)
    page = client.get(reverse("login")).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = client.post(
        reverse("login"),
        {"username": "olivia", "password": PASSWORD, "csrfmiddlewaretoken": token},
        follow=True,
    )
    assert response.redirect_chain[-1][0] == reverse("dashboard")
    assert "Welcome, olivia" in response.content.decode()


def test_wrong_password_stays_on_login_with_an_error(owner):
    response = Client().post(reverse("login"), {"username": "olivia", "password": "nope"})
    assert response.status_code == 200
    assert "correct username and password" in response.content.decode()


def test_dashboard_requires_login():
    response = Client().get(reverse("dashboard"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_pages_load_nothing_from_other_hosts_and_send_a_csp(owner):
    response = logged_in(owner).get(reverse("dashboard"))
    body = response.content.decode()
    assert not re.search(r'(src|href)="(https?:)?//', body)
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_dashboard_says_how_to_configure_a_model_when_none_is(owner, settings):
    settings.HERMES_MODEL = ""
    body = logged_in(owner).get(reverse("dashboard")).content.decode()
    assert "No model is configured" in body
    assert "OPENAI_BASE_URL" in body


def test_logout_is_a_post_and_ends_the_session(owner):
    client = logged_in(owner)
    client.post(reverse("logout"))
    assert client.get(reverse("dashboard")).status_code == 302


def test_password_change(owner):
    client = logged_in(owner)
    response = client.post(
        reverse("password_change"),
        {
            "old_password": PASSWORD,
            "new_password1": "a much longer new secret 42",
            "new_password2": "a much longer new secret 42",
        },
    )
    assert response.status_code == 302
    owner.refresh_from_db()
    assert owner.check_password("a much longer new secret 42")


def test_signup_is_off_by_default():
    assert Client().get(reverse("signup")).status_code == 404


def test_signup_when_enabled_creates_a_member(settings, db):
    settings.HERMES_ALLOW_SIGNUP = True
    response = Client().post(
        reverse("signup"),
        {
            "username": "newbie",
            "password1": "a long enough password 9",
            "password2": "a long enough password 9",
        },
    )
    assert response.status_code == 302
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username="newbie")
    assert not user.is_staff and not user.is_superuser


def test_api_token_is_shown_once_works_and_stops_working_when_revoked(owner):
    client = logged_in(owner)
    client.post(reverse("token_create"), {"name": "laptop", "scopes": ["api"]})
    page = client.get(reverse("account")).content.decode()
    key = re.search(r'id="new-token">([^<]+)<', page).group(1)
    assert 'id="new-token"' not in client.get(reverse("account")).content.decode()
    token = ApiToken.objects.get(user=owner)
    assert token.key_hash != key and key not in token.key_hash

    api = Client()
    me = api.get("/api/me/", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert me.status_code == 200 and me.json()["username"] == "olivia"

    client.post(reverse("token_revoke", args=[token.pk]))
    denied = api.get("/api/me/", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert denied.status_code == 401
    assert denied.json()["error"]["code"] == "authentication_failed"


def test_another_user_cannot_revoke_my_token(owner, outsider):
    logged_in(owner).post(reverse("token_create"), {"name": "mine", "scopes": ["api"]})
    token = ApiToken.objects.get(user=owner)
    response = logged_in(outsider).post(reverse("token_revoke", args=[token.pk]))
    assert response.status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_a_token_gets_the_scopes_ticked_on_the_account_page(owner):
    client = logged_in(owner)
    page = client.get(reverse("account")).content.decode()
    for scope in ("api", "memory:read", "memory:write", "search", "skills:read", "skills:write"):
        assert f'value="{scope}"' in page
    client.post(reverse("token_create"), {"name": "claude", "scopes": ["memory:read", "search"]})
    token = ApiToken.objects.get(user=owner)
    assert token.scope_list == ["memory:read", "search"]
    assert (
        "<code>memory:read</code> <code>search</code>"
        in client.get(reverse("account")).content.decode()
    )


def test_a_token_without_scopes_is_not_created(owner):
    client = logged_in(owner)
    response = client.post(reverse("token_create"), {"name": "nothing"}, follow=True)
    assert "Choose at least one scope for the token." in response.content.decode()
    assert not ApiToken.objects.filter(user=owner).exists()


def test_an_unknown_scope_is_refused(owner):
    response = logged_in(owner).post(
        reverse("token_create"), {"name": "odd", "scopes": ["admin"]}, follow=True
    )
    assert "Choose at least one scope" not in response.content.decode()
    assert "not one of the available choices" in response.content.decode()
    assert not ApiToken.objects.filter(user=owner).exists()


def test_a_token_without_the_api_scope_cannot_use_the_rest_api(owner):
    from accounts.services import api_token_create

    _token, key = api_token_create(user=owner, name="mcp only", scopes=["memory:read"])
    denied = Client().get("/api/me/", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert denied.status_code == 401
    assert "no 'api' scope" in denied.json()["error"]["message"]


def test_api_requires_authentication():
    response = Client().get("/api/me/")
    assert response.status_code in (401, 403)
    assert "error" in response.json()


def test_openapi_schema_is_served(owner):
    response = logged_in(owner).get("/api/schema/")
    assert response.status_code == 200
    assert b"openapi" in response.content


def test_openapi_schema_generates_without_warnings(tmp_path):
    from django.core.management import call_command

    target = tmp_path / "schema.yml"
    call_command("spectacular", "--fail-on-warn", "--file", str(target))
    schema = target.read_text()
    assert "/api/sessions/{session_id}/messages/" in schema and "/api/memory/" in schema
