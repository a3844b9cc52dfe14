"""Single sign-on in Chromium: the whole authorization-code flow from the login page's
button through the real test provider (tests/support/oidc_provider) and back, logout that
ends the provider's session too, and the login and error pages at 1366×900 and 390×844."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Membership, SignInIdentity
from tests.e2e.conftest import DESKTOP, PHONE, SCREENSHOTS, box_inside_viewport, off_loop
from tests.support.oidc_provider.handle import PASSWORD

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PEOPLE = {
    "ada": {
        "email": "ada@example.org",
        "email_verified": True,
        "groups": ["hermes-admins"],
        "name": "Ada Lovelace",
    },
    "lovelace": {"preferred_username": "Ada Lovelace"},
}


@pytest.fixture
def live_server_env(oidc_provider) -> dict[str, str]:
    oidc_provider.set_people(PEOPLE)
    return oidc_provider.settings(HERMES_OIDC_ADMIN_GROUP="hermes-admins")


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{size['width']}x{size['height']}.png"))


def new_page(browser, viewport):
    page = browser.new_page(viewport=viewport)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors


def at_provider_sign_in(page, oidc_provider, username: str) -> None:
    page.wait_for_url(f"{oidc_provider.url}/login/**")
    page.fill("#provider-username", username)
    page.fill("#provider-password", PASSWORD)
    page.click("#provider-submit")


def test_sign_in_with_the_provider_and_out_of_both(live_server_url, browser, oidc_provider):
    page, errors = new_page(browser, DESKTOP)
    page.goto(f"{live_server_url}/memory/")
    page.wait_for_url(f"{live_server_url}/accounts/login/?next=/memory/")
    button = page.get_by_role("link", name="Sign in with Test SSO")
    box_inside_viewport(page, button)
    assert page.locator("#id_password").is_visible()  # password sign-in is still on
    button.click()

    at_provider_sign_in(page, oidc_provider, "ada")
    # Back here, signed in, on the page first asked for.
    page.wait_for_url(f"{live_server_url}/memory/")
    assert page.locator(".who").inner_text().strip() == "ada"

    def account():
        ada = get_user_model().objects.get(username="ada")
        return ada.email, Membership.objects.get(user=ada).role, SignInIdentity.objects.count()

    assert off_loop(account) == ("ada@example.org", "admin", 1)
    assert page.get_by_role("link", name="Team").count() == 1  # the admin group's page

    # No password here: deleting the account is confirmed by the fresh sign-in and the name.
    page.goto(f"{live_server_url}/accounts/#delete")
    confirm = page.get_by_label("Type your username, ada, to confirm")
    confirm.scroll_into_view_if_needed()
    box_inside_viewport(page, confirm)
    assert page.locator("#id_delete_password").count() == 0
    assert page.get_by_role("link", name="Change your password").count() == 0
    shot(page, "sso-account-delete")

    # Logging out ends the provider's session too: the next sign-in asks for the password.
    page.locator("form.logout button").click()
    page.wait_for_url(f"{live_server_url}/accounts/login/")
    page.get_by_role("link", name="Sign in with Test SSO").click()
    page.wait_for_url(f"{oidc_provider.url}/login/**")
    assert page.locator("#provider-password").is_visible()
    assert errors == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1366x900", "390x844"])
def test_the_login_and_error_pages_fit_the_screen(
    live_server_url, browser, oidc_provider, viewport
):
    page, errors = new_page(browser, viewport)
    page.goto(f"{live_server_url}/accounts/login/")
    box_inside_viewport(page, page.get_by_role("link", name="Sign in with Test SSO"))
    box_inside_viewport(page, page.get_by_role("button", name="Log in"))
    shot(page, "sso-login")

    # An answer that does not belong to this browser's sign-in: a 400 page, not a 500.
    response = page.goto(f"{live_server_url}/accounts/oidc/callback/?code=abc&state=forged")
    assert response is not None and response.status == 400
    assert page.get_by_role("heading", level=1).inner_text() == "The sign-in did not complete"
    box_inside_viewport(page, page.get_by_role("link", name="Try again"))
    shot(page, "sso-error-state")

    # Someone the provider vouches for whom the site cannot take: the reason, and no retry.
    page.goto(f"{live_server_url}/accounts/login/")
    page.get_by_role("link", name="Sign in with Test SSO").click()
    at_provider_sign_in(page, oidc_provider, "lovelace")
    page.wait_for_url(f"{live_server_url}/accounts/oidc/callback/**")
    assert page.get_by_role("heading", level=1).inner_text() == "Cannot sign you in"
    assert "'Ada Lovelace'" in page.locator(".error-page").inner_text()
    assert page.get_by_role("link", name="Try again").count() == 0
    box_inside_viewport(page, page.get_by_role("link", name="Back to the login page"))
    shot(page, "sso-error-refused")
    no_scroll = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert no_scroll
    assert errors == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1366x900", "390x844"])
def test_with_password_login_off_the_login_page_is_one_button(
    transactional_db, server_pool, browser, oidc_provider, viewport
):
    url = server_pool.url_for({**oidc_provider.settings(), "HERMES_PASSWORD_LOGIN": "false"})
    oidc_provider.set_people(PEOPLE)
    page, errors = new_page(browser, viewport)
    page.goto(f"{url}/accounts/login/")
    box_inside_viewport(page, page.get_by_role("link", name="Sign in with Test SSO"))
    assert page.locator("input[type=password]").count() == 0
    assert page.get_by_text("Forgot your password").count() == 0
    shot(page, "sso-only-login")
    page.get_by_role("link", name="Sign in with Test SSO").click()
    at_provider_sign_in(page, oidc_provider, "ada")
    page.wait_for_url(f"{url}/")
    assert page.locator(".who").inner_text().strip() == "ada"
    assert errors == []
