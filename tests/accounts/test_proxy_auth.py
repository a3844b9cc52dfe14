"""Sign-in by an auth proxy's header (accounts/proxy_auth.py): believed only from
HERMES_TRUSTED_PROXIES, through the Django test client (REMOTE_ADDR is the peer) and through
the ASGI stack `make serve` runs (TrustedProxyMiddleware in front)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.testing import ApplicationCommunicator, WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.handlers.asgi import ASGIHandler
from django.test import Client
from django.urls import reverse

from accounts.models import Membership
from core.proxy import TrustedProxyMiddleware
from hermes_site.asgi import application
from tests.chat.conftest import HOST, ORIGIN
from tests.factories import UserFactory
from tests.hermes_site.test_settings import run_settings

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.2"
STRANGER = "203.0.113.7"


@pytest.fixture(autouse=True)
def header_auth(settings):
    settings.HERMES_TRUSTED_PROXIES = ["10.0.0.0/8"]
    settings.HERMES_AUTH_HEADER = "Remote-User"
    settings.HERMES_AUTH_EMAIL_HEADER = "Remote-Email"
    settings.HERMES_AUTH_GROUPS_HEADER = "Remote-Groups"
    settings.HERMES_AUTH_ADMIN_GROUP = "hermes-admins"
    settings.HERMES_AUTH_HEADER_CREATE = True


def via(peer: str, user: str | None = None, **headers: str) -> dict[str, str]:
    meta = {"REMOTE_ADDR": peer}
    if user is not None:
        meta["HTTP_REMOTE_USER"] = user
    meta.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    return meta


def welcome(response) -> str:
    return response.content.decode()


def test_first_sign_in_from_the_proxy_creates_the_account_with_email_and_admin_role():
    client = Client()
    page = client.get(
        reverse("dashboard"),
        **via(PROXY, "ada", remote_email="ada@example.org", remote_groups="staff|hermes-admins"),
    )
    assert page.status_code == 200
    assert "Welcome, ada" in welcome(page)
    ada = get_user_model().objects.get(username="ada")
    assert ada.email == "ada@example.org"
    assert not ada.has_usable_password()
    assert ada.membership.role == Membership.Role.ADMIN
    # The team page is an admin's.
    assert client.get(reverse("team"), **via(PROXY, "ada")).status_code == 200

    # Removed from the admin group at the provider: a member at the next sign-in.
    again = Client()
    again.get(reverse("dashboard"), **via(PROXY, "ADA", remote_groups="staff"))
    ada.membership.refresh_from_db()
    assert ada.membership.role == Membership.Role.MEMBER
    assert get_user_model().objects.filter(username__iexact="ada").count() == 1


def test_the_header_from_an_untrusted_peer_is_ignored():
    UserFactory(username="olivia")
    response = Client().get(reverse("dashboard"), **via(STRANGER, "olivia"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert not get_user_model().objects.filter(username="mallory").exists()
    Client().get(reverse("dashboard"), **via(STRANGER, "mallory"))
    assert not get_user_model().objects.filter(username="mallory").exists()


def test_the_header_is_ignored_while_the_setting_is_empty(settings):
    settings.HERMES_AUTH_HEADER = ""
    UserFactory(username="olivia")
    response = Client().get(reverse("dashboard"), **via(PROXY, "olivia"))
    assert response.status_code == 302


def test_a_deactivated_account_is_refused_with_a_clear_page():
    UserFactory(username="olivia", is_active=False)
    response = Client().get(reverse("dashboard"), **via(PROXY, "olivia"))
    assert response.status_code == 403
    assert "The account &#x27;olivia&#x27; is deactivated" in welcome(response)


def test_a_deactivated_person_loses_the_session_the_header_started():
    olivia = UserFactory(username="olivia")
    client = Client()
    assert client.get(reverse("dashboard"), **via(PROXY, "olivia")).status_code == 200
    olivia.is_active = False
    olivia.save()
    assert client.get(reverse("dashboard"), **via(PROXY, "olivia")).status_code == 403


def test_another_name_in_the_header_logs_the_previous_person_out():
    UserFactory(username="olivia")
    UserFactory(username="oscar")
    client = Client()
    assert "Welcome, olivia" in welcome(client.get(reverse("dashboard"), **via(PROXY, "olivia")))
    page = client.get(reverse("dashboard"), **via(PROXY, "oscar"))
    assert "Welcome, oscar" in welcome(page)
    assert "olivia" not in welcome(page)
    # The proxy stops vouching: the session the header started ends.
    gone = client.get(reverse("dashboard"), **via(PROXY))
    assert gone.status_code == 302


def test_a_password_session_is_replaced_only_by_a_different_name():
    olivia = UserFactory(username="olivia")
    client = Client()
    client.force_login(olivia)
    # No header (a direct visit): the password session stays.
    assert "Welcome, olivia" in welcome(client.get(reverse("dashboard"), **via(PROXY)))
    assert "Welcome, olivia" in welcome(client.get(reverse("dashboard"), **via(PROXY, "Olivia")))


def test_without_auto_create_an_unknown_person_gets_a_403_page(settings):
    settings.HERMES_AUTH_HEADER_CREATE = False
    UserFactory(username="olivia")
    response = Client().get(reverse("dashboard"), **via(PROXY, "newcomer"))
    assert response.status_code == 403
    assert "no account called &#x27;newcomer&#x27;" in welcome(response)
    assert not get_user_model().objects.filter(username="newcomer").exists()
    known = Client().get(reverse("dashboard"), **via(PROXY, "olivia"))
    assert "Welcome, olivia" in welcome(known)


def test_a_name_that_is_no_username_is_a_400_not_a_500():
    response = Client().get(reverse("dashboard"), **via(PROXY, "a b/c"))
    assert response.status_code == 400
    assert "not a username here" in welcome(response)
    assert Client().get(reverse("dashboard"), **via(PROXY, "x" * 151)).status_code == 400


def test_a_bad_email_header_is_not_stored():
    Client().get(reverse("dashboard"), **via(PROXY, "ada", remote_email="not an address"))
    assert get_user_model().objects.get(username="ada").email == ""


def test_the_api_follows_the_header_from_the_proxy_only():
    UserFactory(username="olivia")
    me = Client().get("/api/me/", **via(PROXY, "olivia"))
    assert me.status_code == 200 and me.json()["username"] == "olivia"
    assert Client().get("/api/me/", **via(STRANGER, "olivia")).status_code == 401


def test_turning_header_sign_in_off_ends_its_sessions(settings):
    UserFactory(username="olivia")
    client = Client()
    assert client.get(reverse("dashboard"), **via(PROXY, "olivia")).status_code == 200
    settings.HERMES_AUTH_HEADER = ""
    assert client.get(reverse("dashboard"), **via(PROXY)).status_code == 302


# --- Through the ASGI stack of `make serve` ------------------------------------------------


def asgi_get(peer: str, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    scope: dict[str, Any] = {
        "type": "http",
        "scheme": "http",
        "method": "GET",
        "path": path,
        "query_string": b"",
        "client": (peer, 50000),
        "headers": [(b"host", b"127.0.0.1"), *headers],
    }

    async def go() -> tuple[int, bytes]:
        comm = ApplicationCommunicator(TrustedProxyMiddleware(ASGIHandler()), scope)
        await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await comm.receive_output(timeout=10)
        body = await comm.receive_output(timeout=10)
        await comm.wait(timeout=10)
        return start["status"], body["body"]

    return asyncio.run(go())


@pytest.mark.django_db(transaction=True)
def test_through_asgi_the_proxy_is_believed_behind_x_forwarded_for_and_a_stranger_is_not():
    UserFactory(username="olivia")
    header = [(b"remote-user", b"olivia")]
    # The proxy forwards a client: the client address is rewritten, the header still counts.
    status, body = asgi_get(PROXY, "/api/me/", [*header, (b"x-forwarded-for", b"198.51.100.9")])
    assert status == 200 and b'"username":"olivia"' in body
    status, _ = asgi_get(STRANGER, "/api/me/", header)
    assert status == 401


@pytest.mark.django_db(transaction=True)
def test_the_chat_websocket_follows_the_session_the_header_started():
    UserFactory(username="olivia")
    client = Client()
    assert client.get(reverse("dashboard"), **via(PROXY, "olivia")).status_code == 200
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def go() -> bool:
        ws = WebsocketCommunicator(
            application,
            "/ws/chat/",
            headers=[ORIGIN, HOST, (b"cookie", cookie)],
        )
        connected, _ = await ws.connect(timeout=10)
        await ws.disconnect()
        return connected

    assert asyncio.run(go())


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"HERMES_AUTH_HEADER": "Remote User"},
            "HERMES_AUTH_HEADER: 'Remote User' is not a header",
        ),
        ({"HERMES_AUTH_ADMIN_GROUP": "admins"}, "HERMES_AUTH_ADMIN_GROUP needs"),
    ],
)
def test_a_bad_header_setting_stops_startup_with_a_clear_message(tmp_path, env, message):
    result = run_settings(tmp_path, **env)
    assert result.returncode != 0
    assert message in result.stderr
