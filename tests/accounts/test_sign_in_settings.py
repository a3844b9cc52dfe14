"""The ways to sign in, as settings choose them: bad single sign-on settings stop the start,
the login page offers what is on, and with HERMES_PASSWORD_LOGIN off every password path
is gone (and how the first administrator arrives then)."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from accounts.models import Membership
from accounts.oidc.people import claim, groups_of
from tests.factories import PASSWORD, UserFactory
from tests.hermes_site.test_settings import run_settings

ISSUER = "https://sso.example.org/realms/team"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"HERMES_OIDC_ISSUER": "http://sso.example.org", "HERMES_OIDC_CLIENT_ID": "h"},
            "HERMES_OIDC_ISSUER must use https",
        ),
        ({"HERMES_OIDC_ISSUER": "sso.example.org"}, "HERMES_OIDC_ISSUER must be the provider's"),
        ({"HERMES_OIDC_ISSUER": ISSUER}, "HERMES_OIDC_CLIENT_ID is empty"),
        ({"HERMES_OIDC_CLIENT_ID": "hermes"}, "HERMES_OIDC_ISSUER is empty"),
        (
            {
                "HERMES_OIDC_ISSUER": ISSUER,
                "HERMES_OIDC_CLIENT_ID": "h",
                "HERMES_OIDC_SCOPES": "email",
            },
            "HERMES_OIDC_SCOPES must include openid",
        ),
        (
            {
                "HERMES_OIDC_ISSUER": ISSUER,
                "HERMES_OIDC_CLIENT_ID": "h",
                "HERMES_OIDC_ALLOWED_DOMAINS": "example.org,@ex ample.com",
            },
            "HERMES_OIDC_ALLOWED_DOMAINS: 'ex ample.com' is not a domain",
        ),
        (
            {
                "HERMES_OIDC_ISSUER": ISSUER,
                "HERMES_OIDC_CLIENT_ID": "h",
                "HERMES_OIDC_TIMEOUT": "0",
            },
            "HERMES_OIDC_TIMEOUT must be at least 1",
        ),
        (
            {"HERMES_PASSWORD_LOGIN": "false"},
            "HERMES_PASSWORD_LOGIN=false leaves no way to sign in",
        ),
    ],
)
def test_bad_sign_in_settings_stop_the_start_with_a_clear_message(tmp_path, env, message):
    result = run_settings(tmp_path, **env)
    assert result.returncode != 0
    assert message in result.stderr.strip().splitlines()[-1]


def test_good_sign_in_settings_start(tmp_path):
    result = run_settings(
        tmp_path,
        HERMES_OIDC_ISSUER="http://127.0.0.1:9/o/.well-known/openid-configuration",
        HERMES_OIDC_CLIENT_ID="hermes",
        HERMES_OIDC_SCOPES="openid email,profile groups",
        HERMES_OIDC_ALLOWED_DOMAINS="@Example.org",
        HERMES_PASSWORD_LOGIN="false",
    )
    assert result.returncode == 0, result.stderr


def test_claims_are_found_by_name_or_by_a_dotted_path():
    claims = {"https://example.org/roles": ["a"], "realm_access": {"roles": ["b"]}, "x": 1}
    assert claim(claims, "https://example.org/roles") == ["a"]
    assert claim(claims, "realm_access.roles") == ["b"]
    assert claim(claims, "realm_access.missing") is None
    assert claim(claims, "x.y") is None


def test_groups_come_as_a_list_or_a_string_with_keycloak_paths_trimmed():
    assert groups_of(["/team/a", "b", ""]) == {"team/a", "b"}
    assert groups_of("a, b c") == {"a", "b", "c"}
    assert groups_of(None) is None
    assert groups_of([]) == set()


# --- The login page ------------------------------------------------------------------------


@pytest.fixture
def sso_on(settings):
    settings.HERMES_OIDC_ISSUER = ISSUER
    settings.HERMES_OIDC_CLIENT_ID = "hermes"
    settings.HERMES_OIDC_NAME = "Keycloak"


def test_the_login_page_offers_single_sign_on_beside_the_password(db, sso_on):
    page = Client().get(reverse("login") + "?next=/memory/").content.decode()
    assert 'href="/accounts/oidc/login/?next=/memory/">Sign in with Keycloak</a>' in page
    assert 'name="password"' in page


def test_without_single_sign_on_the_login_page_is_the_password_form(db):
    page = Client().get(reverse("login")).content.decode()
    assert "Sign in with" not in page and 'name="password"' in page
    assert Client().get(reverse("oidc_login")).status_code == 404
    assert Client().get(reverse("oidc_callback")).status_code == 404


@pytest.fixture
def passwords_off(settings, sso_on):
    settings.HERMES_PASSWORD_LOGIN = False
    settings.EMAIL_URL = "smtp://127.0.0.1:9"  # "Forgot password" would show with mail


def test_with_password_login_off_the_login_page_has_only_the_button(db, passwords_off):
    page = Client().get(reverse("login")).content.decode()
    assert "Sign in with Keycloak" in page
    assert 'name="password"' not in page and "Forgot your password" not in page


def test_with_password_login_off_a_posted_password_signs_nobody_in(db, passwords_off):
    UserFactory(username="olivia")
    client = Client()
    response = client.post(reverse("login"), {"username": "olivia", "password": PASSWORD})
    assert response.status_code == 403
    assert "Password sign-in is off here: sign in with Keycloak." in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not client.login(username="olivia", password=PASSWORD)


@pytest.mark.parametrize(
    "path",
    [
        "/accounts/password/",
        "/accounts/password/done/",
        "/accounts/password/forgot/",
        "/accounts/password/forgot/sent/",
        "/accounts/signup/",
        "/accounts/welcome/MQ/set-password/",
    ],
)
def test_with_password_login_off_the_password_pages_are_gone(db, settings, passwords_off, path):
    settings.HERMES_ALLOW_SIGNUP = True
    client = Client()
    client.force_login(UserFactory(), backend="accounts.oidc.backend.OIDCBackend")
    assert client.get(path).status_code == 404


def test_turning_password_login_off_ends_the_sessions_it_started(db, settings, sso_on):
    UserFactory(username="olivia")
    client = Client()
    assert client.login(username="olivia", password=PASSWORD)
    settings.HERMES_PASSWORD_LOGIN = False
    assert client.get(reverse("account")).status_code == 302


def test_with_password_login_off_the_admins_login_form_sends_people_to_the_login_page(
    db, passwords_off
):
    response = Client().get("/admin/login/?next=/admin/accounts/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/admin/accounts/"


def test_with_password_login_off_the_team_page_hands_out_no_password_links(
    db, passwords_off, superuser
):
    member = UserFactory(username="mia")
    client = Client()
    client.force_login(superuser, backend="accounts.oidc.backend.OIDCBackend")
    page = client.get(reverse("team")).content.decode()
    assert "first time they sign in with Keycloak" in page and 'name="username"' not in page
    refused = client.post(reverse("team"), {"username": "newbie", "role": "member"})
    assert refused.status_code == 400
    assert not get_user_model().objects.filter(username="newbie").exists()
    member_page = client.get(reverse("team_member", args=[member.pk])).content.decode()
    assert "Reset password" not in member_page and "invitation link" not in member_page
    for name in ("team_member_reset", "team_member_invite"):
        client.post(reverse(name, args=[member.pk]))
    member.refresh_from_db()
    assert member.has_usable_password()


def test_with_password_login_off_no_password_administrator_is_made(db, passwords_off):
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    assert "no password administrator is made" in out.getvalue()
    assert "make_superuser" in out.getvalue()
    assert not get_user_model().objects.exists()


def test_make_superuser_promotes_someone_who_signed_in(db):
    mia = UserFactory(username="Mia")
    out = io.StringIO()
    call_command("make_superuser", "mia", stdout=out)
    mia.refresh_from_db()
    assert mia.is_superuser and mia.is_staff
    assert Membership.objects.get(user=mia).role == Membership.Role.ADMIN
    assert "Mia is now a superuser" in out.getvalue()
    with pytest.raises(CommandError, match="no account called 'nobody'"):
        call_command("make_superuser", "nobody")
