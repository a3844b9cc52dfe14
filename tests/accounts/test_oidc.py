"""Single sign-on against a real OpenID Connect provider (tests/support/oidc_provider, a
process of its own): the site is driven with Django's test client, the provider with a
plain HTTP client acting as the browser there, and the site talks to the provider over
real HTTP (discovery, keys, token, userinfo, end-session)."""

from __future__ import annotations

import html
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from accounts.models import LoginThrottle, Membership, SignInIdentity
from accounts.oidc import BACKEND
from accounts.reauth import SIGNED_IN_AT
from tests.conftest import free_port
from tests.factories import UserFactory
from tests.support.oidc_provider.handle import PUBLIC_CLIENT_ID, start_provider

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

PEOPLE = {
    "ada": {
        "email": "ada@example.org",
        "email_verified": True,
        "groups": ["hermes", "hermes-admins"],
        "name": "Ada Lovelace",
    },
    "bob": {"email": "bob@example.org", "email_verified": True, "groups": ["hermes"]},
    "eve": {"email": "eve@elsewhere.net", "email_verified": True, "groups": ["hermes"]},
    "carl": {"email": "carl@example.org", "email_verified": False, "groups": ["hermes"]},
    "nog": {"email": "nog@example.org", "email_verified": True},
    "otto": {"email": "otto@example.org", "email_verified": True, "groups": ["visitors"]},
}


@pytest.fixture
def sso(oidc_provider, settings):
    for name, value in oidc_provider.settings(HERMES_OIDC_ADMIN_GROUP="hermes-admins").items():
        setattr(settings, name, value)
    cache.clear()  # the discovery document of another test's settings
    oidc_provider.set_people(PEOPLE)
    return oidc_provider


@pytest.fixture
def browser_at_provider():
    with httpx.Client(timeout=10) as http:
        yield http


def start(client: Client, next_url: str = "") -> str:
    """The authorization URL the site sends the browser to."""
    response = client.get(reverse("oidc_login") + (f"?next={next_url}" if next_url else ""))
    assert response.status_code == 302, response.content
    return response["Location"]


def sign_in(client: Client, provider, username: str, http: httpx.Client | None = None):
    """The site's answer to the provider's redirect back after `username` signed in."""
    with httpx.Client(timeout=10) as own:
        back = provider.sign_in(http or own, start(client), username)
    return client.get(back)


def signed_in_as(client: Client) -> str | None:
    page = client.get(reverse("account"))
    if page.status_code != 200:
        return None
    return get_user_model().objects.get(pk=client.session["_auth_user_id"]).username


def refused(response, status: int, *words: str) -> str:
    text = html.unescape(response.content.decode())
    assert response.status_code == status, text
    for word in words:
        assert word in text, text
    return text


def test_first_sign_in_creates_the_account_from_the_verified_claims(sso):
    client = Client()
    response = sign_in(client, sso, "ada")
    assert response.status_code == 302 and response["Location"] == reverse("dashboard")
    ada = get_user_model().objects.get(username="ada")
    assert ada.email == "ada@example.org"
    assert not ada.has_usable_password()
    assert Membership.objects.get(user=ada).role == Membership.Role.ADMIN
    identity = SignInIdentity.objects.get(user=ada)
    assert identity.issuer == sso.issuer and identity.subject and identity.last_sign_in_at
    assert client.session["_auth_user_backend"] == BACKEND
    assert "Welcome, ada" in client.get(reverse("dashboard")).content.decode()
    # Signing in through the provider is no password attempt for the login throttle.
    assert not LoginThrottle.objects.exists()


def test_the_next_page_survives_the_trip_to_the_provider(sso):
    client = Client()
    with httpx.Client(timeout=10) as http:
        back = sso.sign_in(http, start(client, next_url="/memory/"), "bob")
    response = client.get(back)
    assert response.status_code == 302 and response["Location"] == "/memory/"


def test_a_known_subject_signs_in_to_its_account_whatever_its_name_becomes(sso):
    client = Client()
    sign_in(client, sso, "ada")
    sso.set_people(
        {
            **PEOPLE,
            "ada": {**PEOPLE["ada"], "preferred_username": "ada.king", "email": "ak@example.org"},
        }
    )
    client = Client()
    sign_in(client, sso, "ada")
    assert signed_in_as(client) == "ada"
    assert get_user_model().objects.count() == 1
    assert get_user_model().objects.get().email == "ak@example.org"


def test_the_admin_group_makes_and_unmakes_team_admins_at_each_sign_in(sso):
    sign_in(Client(), sso, "ada")
    ada = get_user_model().objects.get(username="ada")
    assert Membership.objects.get(user=ada).role == Membership.Role.ADMIN
    sso.set_people({**PEOPLE, "ada": {**PEOPLE["ada"], "groups": ["hermes"]}})
    sign_in(Client(), sso, "ada")
    assert Membership.objects.get(user=ada).role == Membership.Role.MEMBER
    sign_in(Client(), sso, "bob")
    assert Membership.objects.get(user__username="bob").role == Membership.Role.MEMBER


def test_only_verified_addresses_at_the_allowed_domains_get_in(sso, settings):
    settings.HERMES_OIDC_ALLOWED_DOMAINS = ["example.org"]
    refused(
        sign_in(Client(), sso, "eve"), 403, "eve@elsewhere.net", "only addresses at example.org"
    )
    refused(sign_in(Client(), sso, "carl"), 403, "has not verified your e-mail address")
    assert not get_user_model().objects.exists()
    client = Client()
    sign_in(client, sso, "bob")
    assert signed_in_as(client) == "bob"


def test_trusting_addresses_admits_a_provider_that_sends_no_email_verified(sso, settings):
    settings.HERMES_OIDC_ALLOWED_DOMAINS = ["example.org"]
    sso.set_people({"azure": {"email": "az@example.org"}})
    refused(sign_in(Client(), sso, "azure"), 403, "has not verified")
    settings.HERMES_OIDC_TRUST_EMAIL = True
    client = Client()
    sign_in(client, sso, "azure")
    assert signed_in_as(client) == "azure"
    assert get_user_model().objects.get(username="azure").email == "az@example.org"


def test_only_members_of_an_allowed_group_or_the_admin_group_get_in(sso, settings):
    settings.HERMES_OIDC_ALLOWED_GROUPS = ["hermes"]
    refused(sign_in(Client(), sso, "nog"), 403, "did not say which groups", "'groups'")
    refused(sign_in(Client(), sso, "otto"), 403, "Only members of hermes")
    sso.set_people({**PEOPLE, "root": {"groups": ["/hermes-admins"]}})
    client = Client()
    sign_in(client, sso, "root")
    assert signed_in_as(client) == "root"
    assert Membership.objects.get(user__username="root").role == Membership.Role.ADMIN


def test_a_group_claim_nested_in_an_object_is_read_by_its_dotted_name(sso, settings):
    settings.HERMES_OIDC_ALLOWED_GROUPS = ["chat"]
    settings.HERMES_OIDC_GROUPS_CLAIM = "realm_access.roles"
    sso.set_people({"kc": {"claims": {"realm_access": {"roles": ["offline", "chat"]}}}})
    client = Client()
    sign_in(client, sso, "kc")
    assert signed_in_as(client) == "kc"


def test_a_tampered_state_is_refused_and_signs_nobody_in(sso):
    client = Client()
    with httpx.Client(timeout=10) as http:
        back = sso.sign_in(http, start(client), "ada")
    parts = urlsplit(back)
    query = parse_qs(parts.query)
    query["state"] = [query["state"][0][:-2] + "xx"]
    tampered = f"{parts.path}?{urlencode(query, doseq=True)}"
    refused(client.get(tampered), 400, "does not belong to a sign-in started in this browser")
    assert signed_in_as(client) is None
    assert not get_user_model().objects.exists()


def test_an_answer_used_twice_is_refused_the_second_time(sso):
    client = Client()
    with httpx.Client(timeout=10) as http:
        back = sso.sign_in(http, start(client), "ada")
    assert client.get(back).status_code == 302
    refused(client.get(back), 400, "used already")


def test_an_expired_code_gets_a_page_that_says_to_start_again(sso):
    client = Client()
    with httpx.Client(timeout=10) as http:
        back = sso.sign_in(http, start(client), "ada")
    assert sso.expire_codes() >= 1
    text = refused(client.get(back), 400, "took too long", "Try again")
    assert "Cannot sign you in" not in text
    assert signed_in_as(client) is None


def test_a_token_for_another_sign_in_fails_the_nonce_check(sso):
    client = Client()
    with httpx.Client(timeout=10) as http:
        back = sso.sign_in(http, start(client), "ada")
    session = client.session
    state = parse_qs(urlsplit(back).query)["state"][0]
    session["oidc_states"][state]["nonce"] = "someone-elses-nonce"
    session.save()
    refused(client.get(back), 400, "nonce does not match")
    assert signed_in_as(client) is None


def test_the_pkce_verifier_is_what_the_provider_checks_the_code_against(sso):
    client = Client()
    authorize = start(client)
    assert parse_qs(urlsplit(authorize).query)["code_challenge_method"] == ["S256"]
    with httpx.Client(timeout=10) as http:
        back = sso.sign_in(http, authorize, "ada")
    session = client.session
    state = parse_qs(urlsplit(back).query)["state"][0]
    session["oidc_states"][state]["code_verifier"] = "x" * 64
    session.save()
    refused(client.get(back), 400, "no longer accepts this sign-in")
    assert signed_in_as(client) is None


def test_a_deactivated_account_is_refused_and_its_sessions_end(sso):
    client = Client()
    sign_in(client, sso, "ada")
    ada = get_user_model().objects.get(username="ada")
    ada.is_active = False
    ada.save()
    assert signed_in_as(client) is None
    refused(sign_in(Client(), sso, "ada"), 403, "'ada' here is deactivated")


def test_with_linking_on_a_verified_address_takes_over_the_existing_account(sso, settings):
    settings.HERMES_OIDC_LINK_BY_EMAIL = True
    olivia = UserFactory(username="olivia", email="Bob@Example.org")
    client = Client()
    sign_in(client, sso, "bob")
    assert signed_in_as(client) == "olivia"
    assert SignInIdentity.objects.get().user == olivia
    assert not get_user_model().objects.filter(username="bob").exists()
    # Once linked, the provider's account stays with it.
    again = Client()
    sign_in(again, sso, "bob")
    assert signed_in_as(again) == "olivia"


def test_with_linking_on_an_unverified_address_takes_over_nothing(sso, settings):
    settings.HERMES_OIDC_LINK_BY_EMAIL = True
    carla = UserFactory(username="carla", email="carl@example.org")
    client = Client()
    sign_in(client, sso, "carl")
    assert signed_in_as(client) == "carl"
    carl = get_user_model().objects.get(username="carl")
    assert carl != carla and carl.email == ""


def test_with_linking_off_an_existing_account_is_never_entered(sso):
    UserFactory(username="bob", email="bob@example.org")
    client = Client()
    refused(sign_in(client, sso, "bob"), 403, "already an account called 'bob'")
    assert signed_in_as(client) is None
    assert not SignInIdentity.objects.exists()


def test_an_account_linked_to_another_subject_is_not_taken_by_email(sso, settings):
    settings.HERMES_OIDC_LINK_BY_EMAIL = True
    sign_in(Client(), sso, "bob")
    sso.set_people({**PEOPLE, "bob2": {"email": "bob@example.org", "email_verified": True}})
    refused(sign_in(Client(), sso, "bob2"), 403, "already linked to another Test SSO account")


def test_without_account_creation_strangers_are_refused(sso, settings):
    settings.HERMES_OIDC_CREATE_USERS = False
    refused(sign_in(Client(), sso, "ada"), 403, "new accounts are not made at sign-in")
    assert not get_user_model().objects.exists()


def test_a_username_claim_that_is_no_username_is_refused_with_the_claim_named(sso, settings):
    sso.set_people({"ada": {"preferred_username": "Ada Lovelace"}})
    refused(sign_in(Client(), sso, "ada"), 403, "'Ada Lovelace'", "'preferred_username'")
    settings.HERMES_OIDC_USERNAME_CLAIM = "email"
    refused(sign_in(Client(), sso, "ada"), 403, "did not send the claim 'email'")


def test_logout_ends_the_session_here_and_at_the_provider(sso):
    client = Client()
    with httpx.Client(timeout=10) as http:
        client.get(sso.sign_in(http, start(client), "ada"))
        assert signed_in_as(client) == "ada"
        response = client.post(reverse("logout"))
        # A page that forwards the browser (forms may post only to the site: CSP).
        assert response.status_code == 200
        end_session = response.context["url"]
        assert f'content="0;url={html.escape(end_session)}"' in response.content.decode()
        assert end_session.startswith(f"{sso.issuer}/logout/")
        params = parse_qs(urlsplit(end_session).query)
        assert params["post_logout_redirect_uri"] == ["http://testserver/accounts/login/"]
        assert params["id_token_hint"][0].count(".") == 2
        assert signed_in_as(client) is None
        # The browser follows it: the provider ends its session and sends it back here.
        at_provider = http.get(end_session)
        assert at_provider.is_redirect
        assert at_provider.headers["location"] == "http://testserver/accounts/login/"
        # The next sign-in asks for the password at the provider again.
        asked = http.get(start(client))
        assert asked.is_redirect and "/login/" in asked.headers["location"]


def test_a_password_session_logs_out_here_only(sso):
    UserFactory(username="olivia")
    client = Client()
    client.login(username="olivia", password="correct horse battery staple")
    response = client.post(reverse("logout"))
    assert response["Location"] == reverse("login")


def test_turning_single_sign_on_off_ends_its_sessions(sso, settings):
    client = Client()
    sign_in(client, sso, "ada")
    settings.HERMES_OIDC_ISSUER = ""
    assert signed_in_as(client) is None
    assert Client().get(reverse("oidc_login")).status_code == 404


def test_a_public_client_signs_in_with_pkce_alone(sso, settings):
    settings.HERMES_OIDC_CLIENT_ID = PUBLIC_CLIENT_ID
    settings.HERMES_OIDC_CLIENT_SECRET = ""
    client = Client()
    sign_in(client, sso, "bob")
    assert signed_in_as(client) == "bob"


def test_a_wrong_client_secret_is_a_page_for_the_administrator(sso, settings):
    settings.HERMES_OIDC_CLIENT_SECRET = "not-the-secret"
    refused(sign_in(Client(), sso, "ada"), 502, "not set up correctly", "Tell your administrator")


def test_a_discovery_document_for_another_issuer_is_not_trusted(sso, settings):
    settings.HERMES_OIDC_ISSUER = sso.issuer.replace("127.0.0.1", "localhost")
    refused(Client().get(reverse("oidc_login")), 502, "is for the issuer")


def test_a_provider_that_is_down_gets_a_503_page(sso, settings):
    settings.HERMES_OIDC_ISSUER = f"http://127.0.0.1:{free_port()}/o"
    response = Client().get(reverse("oidc_login"))
    refused(response, 503, "Cannot reach Test SSO", "Try again in a minute")
    assert response["Retry-After"] == "60"


def test_a_provider_that_dies_during_the_sign_in_gets_a_503_page(sso, settings, tmp_path):
    doomed = start_provider(tmp_path / "doomed", free_port())
    try:
        for name, value in doomed.settings().items():
            setattr(settings, name, value)
        doomed.set_people(PEOPLE)
        client = Client()
        with httpx.Client(timeout=10) as http:
            back = doomed.sign_in(http, start(client), "ada")
    finally:
        doomed.stop()
    response = client.get(back)
    refused(response, 503, "cannot be reached right now")
    assert response["Retry-After"] == "60"
    assert signed_in_as(client) is None


def test_the_provider_ending_the_sign_in_is_said_on_the_page(sso):
    client = Client()
    state = parse_qs(urlsplit(start(client)).query)["state"][0]
    response = client.get(
        reverse("oidc_callback"),
        {"error": "access_denied", "error_description": "The user cancelled", "state": state},
    )
    refused(response, 403, "Test SSO did not sign you in: The user cancelled.")
    assert state not in client.session["oidc_states"]


def test_the_callback_without_a_code_is_a_400_page_not_a_500(sso):
    refused(Client().get(reverse("oidc_callback")), 400, "brought nothing to sign in with")
    refused(Client().get(reverse("oidc_callback"), {"code": "x", "state": "y"}), 400, "Start again")


def test_deleting_an_account_without_password_asks_the_provider_to_check_again(sso):
    client = Client()
    with httpx.Client(timeout=10) as http:
        client.get(sso.sign_in(http, start(client), "ada"))
        session = client.session
        session[SIGNED_IN_AT] = int(time.time()) - 3600  # signed in an hour ago
        session.save()
        client.post(reverse("account_delete"), {"confirm": "ada"})
        assert get_user_model().objects.filter(username="ada").exists()

        again = client.get(reverse("oidc_login"), {"reauth": "1", "next": "/accounts/#delete"})
        authorize = again["Location"]
        params = parse_qs(urlsplit(authorize).query)
        assert (params["prompt"], params["max_age"]) == (["login"], ["0"])
        # The provider's session is still on, yet it asks for the password again.
        asked = http.get(authorize)
        assert asked.is_redirect and "/login/" in asked.headers["location"]
        back = client.get(sso.sign_in(http, authorize, "ada"))
        assert back["Location"] == "/accounts/#delete"
    assert client.post(reverse("account_delete"), {"confirm": "ada"}).status_code == 200
    assert not get_user_model().objects.filter(username="ada").exists()
