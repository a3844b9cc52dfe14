"""Brute force on the login: a time-bound lockout per username and per real client
address that rotating X-Forwarded-For cannot get around, answered with a clear 429."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import LoginThrottle
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db

ATTACKER = "203.0.113.66"


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.HERMES_TRUSTED_PROXIES = ["127.0.0.1"]
    settings.HERMES_LOGIN_MAX_PER_USER = 5
    settings.HERMES_LOGIN_MAX_PER_IP = 20
    settings.HERMES_LOGIN_WINDOW_SECONDS = 900
    settings.HERMES_LOGIN_LOCKOUT_SECONDS = 900


def attempt(client: Client, username: str, password: str, **meta: str):
    return client.post(reverse("login"), {"username": username, "password": password}, **meta)


def test_rotating_x_forwarded_for_does_not_escape_the_lockout(owner):
    client = Client()
    statuses = [
        attempt(
            client,
            "olivia",
            f"guess-{i}",
            REMOTE_ADDR=ATTACKER,
            HTTP_X_FORWARDED_FOR=f"10.0.{i}.{i}",
        ).status_code
        for i in range(100)
    ]
    assert statuses[:5] == [200] * 5  # the form again, "enter a correct username…"
    assert set(statuses[5:]) == {429}

    # Locked means locked: the right password does not get in either, from anywhere.
    response = attempt(Client(), "olivia", PASSWORD, REMOTE_ADDR="198.51.100.9")
    assert response.status_code == 429
    body = response.content.decode()
    assert "Too many login attempts" in body
    assert "Try again in 15 minutes" in body
    assert int(response["Retry-After"]) > 800


def test_one_address_guessing_many_usernames_is_locked_out(owner, settings):
    settings.HERMES_LOGIN_MAX_PER_IP = 8
    client = Client()
    statuses = [
        attempt(client, f"user{i}", "guess", REMOTE_ADDR=ATTACKER).status_code for i in range(12)
    ]
    assert statuses[:8] == [200] * 8
    assert set(statuses[8:]) == {429}
    # Other people, elsewhere, still log in.
    response = attempt(Client(), "olivia", PASSWORD, REMOTE_ADDR="198.51.100.9")
    assert response.status_code == 302


def test_behind_the_proxy_each_real_client_has_its_own_address_limit(owner, settings):
    settings.HERMES_LOGIN_MAX_PER_IP = 3
    proxy = {"REMOTE_ADDR": "127.0.0.1"}
    for i in range(3):
        assert (
            attempt(Client(), f"x{i}", "guess", HTTP_X_FORWARDED_FOR=ATTACKER, **proxy).status_code
            == 200
        )
    assert (
        attempt(Client(), "x9", "guess", HTTP_X_FORWARDED_FOR=ATTACKER, **proxy).status_code == 429
    )
    # A colleague behind the same proxy is somebody else.
    colleague = attempt(Client(), "olivia", PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.9", **proxy)
    assert colleague.status_code == 302


def test_the_lockout_ends_by_itself(owner):
    client = Client()
    for i in range(6):
        attempt(client, "olivia", f"guess-{i}", REMOTE_ADDR=ATTACKER)
    assert attempt(client, "olivia", PASSWORD, REMOTE_ADDR=ATTACKER).status_code == 429
    # Fifteen minutes later (moved back in time rather than waited for).
    past = timezone.now() - timedelta(seconds=901)
    LoginThrottle.objects.update(locked_until=past, window_started_at=past)
    assert attempt(client, "olivia", PASSWORD, REMOTE_ADDR=ATTACKER).status_code == 302


def test_a_successful_login_clears_the_usernames_failures(owner):
    for i in range(4):
        attempt(Client(), "olivia", f"typo-{i}", REMOTE_ADDR="198.51.100.9")
    assert attempt(Client(), "olivia", PASSWORD, REMOTE_ADDR="198.51.100.9").status_code == 302
    # Four more typos are fine again: the count started over.
    statuses = [
        attempt(Client(), "olivia", f"typo-{i}", REMOTE_ADDR="198.51.100.9").status_code
        for i in range(4)
    ]
    assert statuses == [200] * 4


def test_usernames_are_throttled_case_insensitively(owner):
    for i in range(5):
        attempt(Client(), "olivia" if i % 2 else "OLIVIA", "guess", REMOTE_ADDR=ATTACKER)
    assert attempt(Client(), "Olivia", "guess", REMOTE_ADDR="198.51.100.9").status_code == 429


def test_the_admin_login_is_throttled_too(superuser):
    url = reverse("admin:login")
    statuses = [
        Client()
        .post(url, {"username": "root", "password": f"guess-{i}"}, REMOTE_ADDR=ATTACKER)
        .status_code
        for i in range(7)
    ]
    assert statuses[-1] == 429
    response = Client().post(url, {"username": "root", "password": PASSWORD}, REMOTE_ADDR=ATTACKER)
    assert response.status_code == 429


def test_the_table_keeps_neither_addresses_nor_typed_usernames(owner):
    attempt(Client(), "olivia-secret-typo", "guess", REMOTE_ADDR=ATTACKER)
    keys = list(LoginThrottle.objects.values_list("key", flat=True))
    assert len(keys) == 2
    assert not any(ATTACKER in k or "olivia" in k for k in keys)


def test_signing_up_still_logs_the_new_member_in(settings):
    # The throttled backend replaced ModelBackend; a login naming the old one would not last.
    settings.HERMES_ALLOW_SIGNUP = True
    client = Client()
    password = "a long enough password 9"
    client.post(
        reverse("signup"), {"username": "newbie", "password1": password, "password2": password}
    )
    assert client.get(reverse("dashboard")).status_code == 200


def logged_in(user) -> Client:
    client = Client(REMOTE_ADDR=ATTACKER)
    client.force_login(user)
    return client


def test_deleting_the_account_shares_the_login_lockout(owner, outsider):
    client = logged_in(owner)
    url = reverse("api-me")
    statuses = [
        client.delete(url, {"password": f"guess-{i}"}, content_type="application/json").status_code
        for i in range(8)
    ]
    assert statuses == [403] * 5 + [429] * 3
    # Locked: the right password does not erase anything, and the login is locked too.
    response = client.delete(url, {"password": PASSWORD}, content_type="application/json")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "too_many_attempts"
    assert int(response["Retry-After"]) > 800
    assert get_user_model().objects.filter(pk=owner.pk).exists()
    assert attempt(Client(), owner.username, PASSWORD).status_code == 429
    # The other person's account is not locked by these guesses.
    assert attempt(Client(), outsider.username, PASSWORD).status_code == 302


def test_the_password_change_form_shares_the_login_lockout(owner):
    client = logged_in(owner)

    def change(old: str):
        new = "a much longer new secret 42"
        data = {"old_password": old, "new_password1": new, "new_password2": new}
        return client.post(reverse("password_change"), data)

    statuses = [change(f"guess-{i}").status_code for i in range(8)]
    assert statuses == [200] * 5 + [429] * 3
    response = change(PASSWORD)
    assert response.status_code == 429
    assert "Too many password attempts — try again in 15 minutes." in response.content.decode()
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)  # not changed while locked
    assert attempt(Client(), owner.username, PASSWORD).status_code == 429


def test_a_right_password_clears_the_failures_of_the_password_form(owner):
    client = logged_in(owner)
    for i in range(4):
        data = {"old_password": f"guess-{i}", "new_password1": "x", "new_password2": "x"}
        assert client.post(reverse("password_change"), data).status_code == 200
    new = "a much longer new secret 42"
    data = {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    assert client.post(reverse("password_change"), data).status_code == 302
    assert not LoginThrottle.objects.filter(key__startswith="user:").exists()
