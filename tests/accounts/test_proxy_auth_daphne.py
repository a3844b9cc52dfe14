"""Sign-in by an auth proxy's header on a real connection: daphne running what `make serve`
runs (hermes_site.asgi_proxy), reached from a trusted peer address (the proxy) and from an
untrusted one (anyone else on the network), each a real TCP source address on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from django.contrib.auth import get_user_model

from tests.conftest import free_port, start_daphne, stop_process

pytestmark = [pytest.mark.slow]

PROXY = "127.0.0.2"
STRANGER = "127.0.0.3"


@pytest.fixture
def proxied_site(transactional_db, tmp_path) -> Iterator[str]:
    port = free_port()
    env = {
        "HERMES_TRUSTED_PROXIES": PROXY,
        "HERMES_AUTH_HEADER": "Remote-User",
        "HERMES_AUTH_EMAIL_HEADER": "Remote-Email",
    }
    proc = start_daphne(
        port, tmp_path / "daphne.log", env, app="hermes_site.asgi_proxy:application"
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def connecting_from(address: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=10)


def test_the_header_signs_in_from_the_proxy_only(proxied_site):
    headers = {"Remote-User": "ada", "Remote-Email": "ada@example.org"}
    with connecting_from(STRANGER) as stranger:
        # Anyone else's header is dropped, and so is a claim to be forwarding for the proxy.
        page = stranger.get(
            f"{proxied_site}/accounts/", headers={**headers, "X-Forwarded-For": PROXY}
        )
        assert page.status_code == 302 and page.headers["location"].startswith("/accounts/login/")
    assert not get_user_model().objects.filter(username="ada").exists()

    with connecting_from(PROXY) as proxy:
        page = proxy.get(f"{proxied_site}/accounts/", headers=headers)
        assert page.status_code == 200
        assert '<span class="who">ada</span>' in page.text
        ada = get_user_model().objects.get(username="ada")
        assert ada.email == "ada@example.org"
        # The session cookie alone does not keep a session the header started.
        page = proxy.get(f"{proxied_site}/accounts/")
        assert page.status_code == 302


def test_a_session_the_header_made_cannot_be_carried_to_another_address(proxied_site):
    with connecting_from(PROXY) as proxy:
        assert (
            proxy.get(f"{proxied_site}/accounts/", headers={"Remote-User": "ada"}).status_code
            == 200
        )
        cookies = proxy.cookies
    with connecting_from(STRANGER) as stranger:
        stranger.cookies = cookies
        page = stranger.get(f"{proxied_site}/accounts/", headers={"Remote-User": "ada"})
        # From a stranger the header is gone, so the session it started ends.
        assert page.status_code == 302
