"""Deleting an account that has no password (made by single sign-on or an auth proxy): a
recent sign-in and the username confirm it, as a password does for others."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from accounts.oidc import BACKEND as OIDC_BACKEND
from accounts.reauth import RECENT_SECONDS, SIGNED_IN_AT
from accounts.services import api_token_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

DELETE = reverse("account_delete")


@pytest.fixture
def sso_user(settings):
    settings.HERMES_OIDC_ISSUER = "https://sso.example.org"
    settings.HERMES_OIDC_CLIENT_ID = "hermes"
    settings.HERMES_OIDC_NAME = "Keycloak"
    user = UserFactory(username="ada")
    user.set_unusable_password()
    user.save()
    return user


def signed_in(user, *, ago: int = 0) -> Client:
    client = Client()
    client.force_login(user, backend=OIDC_BACKEND)
    session = client.session
    session[SIGNED_IN_AT] = int(time.time()) - ago
    session.save()
    return client


def exists(username: str) -> bool:
    return get_user_model().objects.filter(username=username).exists()


def test_a_recent_sign_in_and_the_username_delete_an_account_without_password(sso_user):
    client = signed_in(sso_user)
    page = client.get(reverse("account")).content.decode()
    assert 'id="id_delete_confirm"' in page and 'id="id_delete_password"' not in page
    wrong = client.post(DELETE, {"confirm": "bob"}, follow=True)
    assert "Type your username, ada, to confirm." in wrong.content.decode()
    assert exists("ada")
    done = client.post(DELETE, {"confirm": "ada"})
    assert done.status_code == 200 and not exists("ada")


def test_an_old_sign_in_must_sign_in_again_before_deleting(sso_user):
    client = signed_in(sso_user, ago=RECENT_SECONDS + 60)
    page = client.get(reverse("account")).content.decode()
    assert 'href="/accounts/oidc/login/?reauth=1&amp;next=%2Faccounts%2F%23delete"' in page
    assert "Sign in again with Keycloak" in page and 'id="id_delete_confirm"' not in page
    refused = client.post(DELETE, {"confirm": "ada"}, follow=True)
    assert "sign in again with Keycloak" in refused.content.decode()
    assert exists("ada")


def test_a_token_cannot_delete_an_account_without_password(sso_user):
    _token, key = api_token_create(user=sso_user, name="script")
    response = Client().delete(
        "/api/me/",
        {"confirm": "ada"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "sign_in_again"
    assert exists("ada")


def test_a_session_the_auth_proxy_vouches_for_confirms_with_the_username(settings):
    settings.HERMES_TRUSTED_PROXIES = ["10.0.0.0/8"]
    settings.HERMES_AUTH_HEADER = "Remote-User"
    client = Client(REMOTE_ADDR="10.0.0.2", HTTP_REMOTE_USER="grace")
    page = client.get(reverse("account")).content.decode()
    assert 'id="id_delete_confirm"' in page
    session = client.session
    session[SIGNED_IN_AT] = 0  # the proxy checks at every request: no age to reach
    session.save()
    assert client.post(DELETE, {"confirm": "grace"}).status_code == 200
    assert not exists("grace")


def test_with_a_password_the_password_still_confirms(db):
    user = UserFactory(username="olivia")
    client = Client()
    client.force_login(user)
    page = client.get(reverse("account")).content.decode()
    assert 'id="id_delete_password"' in page and 'id="id_delete_confirm"' not in page
    assert client.post(DELETE, {"confirm": "olivia"}).status_code == 302
    assert exists("olivia")
