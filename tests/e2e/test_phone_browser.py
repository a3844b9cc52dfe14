"""Phones (390×844 and 360×640) and the desktop (1366×900) in Chromium: the navigation folds
into one Menu button, the chat's composer and Send stay on screen, the conversation drawer
closes by its button, Esc and a tap outside, and no page scrolls sideways."""

from __future__ import annotations

import pytest

from accounts.models import Membership
from tests.e2e.conftest import SCREENSHOTS, logged_in_page, off_loop
from tests.factories import UserFactory, conversation_with

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PHONES = [{"width": 390, "height": 844}, {"width": 360, "height": 640}]
DESKTOP = {"width": 1366, "height": 900}
# Every page of the navigation a team admin sees.
PAGES = [
    "Dashboard",
    "Chat",
    "Sessions",
    "Memory",
    "Inferences",
    "Skills",
    "Usage",
    "Account",
    "Team",
]


@pytest.fixture
def ada(transactional_db):
    """A team admin (not staff): the navigation shows every page, Team included."""
    user = UserFactory(username="ada")
    Membership.objects.create(user=user, role="admin")
    return user


def inside_viewport(page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= size["width"]
        and box["y"] + box["height"] <= size["height"]
    )


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{size['width']}x{size['height']}.png"))


def nav_links_visible(page) -> int:
    return sum(page.locator(".mainnav a").nth(i).is_visible() for i in range(len(PAGES)))


@pytest.mark.parametrize("viewport", PHONES, ids=["390x844", "360x640"])
def test_phone_navigation_is_one_menu_button_that_opens_and_closes(
    ada, live_server_url, browser, viewport
):
    page, errors = logged_in_page(browser, live_server_url, ada, viewport)
    topbar = page.locator(".topbar").bounding_box()
    assert topbar is not None and topbar["height"] < 60  # one row, not four
    assert page.is_visible("#nav-toggle")
    assert nav_links_visible(page) == 0

    page.click("#nav-toggle")
    assert nav_links_visible(page) == len(PAGES)
    assert page.get_attribute("#nav-toggle", "aria-expanded") == "true"
    shot(page, "nav-open")
    page.click("#nav-toggle")
    assert nav_links_visible(page) == 0

    page.click("#nav-toggle")
    page.keyboard.press("Escape")
    assert nav_links_visible(page) == 0
    assert page.get_attribute("#nav-toggle", "aria-expanded") == "false"

    page.click("#nav-toggle")
    page.mouse.click(viewport["width"] // 2, viewport["height"] - 20)  # outside the menu
    assert nav_links_visible(page) == 0

    page.click("#nav-toggle")
    page.click(".mainnav >> text=Memory")
    page.wait_for_url(f"{live_server_url}/memory/")
    assert errors == []


@pytest.mark.parametrize("viewport", PHONES, ids=["390x844", "360x640"])
def test_no_page_scrolls_sideways_on_a_phone(ada, live_server_url, browser, viewport):
    off_loop(lambda: conversation_with(ada, "A rather long question " * 30, title="Long one"))
    page, errors = logged_in_page(browser, live_server_url, ada, viewport)
    page.click("#nav-toggle")
    urls = [page.get_attribute(f".mainnav >> text={label}", "href") for label in PAGES]
    for label, url in zip(PAGES, urls, strict=True):
        page.goto(f"{live_server_url}{url}")
        width = page.evaluate("document.scrollingElement.scrollWidth")
        assert width <= page.evaluate("innerWidth"), f"{label} scrolls sideways ({width}px)"
        shot(page, f"page-{label.lower()}")
    assert errors == []


@pytest.mark.parametrize("viewport", PHONES, ids=["390x844", "360x640"])
def test_phone_chat_keeps_composer_and_send_on_screen(ada, live_server_url, browser, viewport):
    chat = off_loop(lambda: conversation_with(ada, *[f"Question {i}? " * 20 for i in range(12)]))
    page, errors = logged_in_page(browser, live_server_url, ada, viewport)
    for url in ("/chat/", f"/chat/{chat.id}/"):
        page.goto(f"{live_server_url}{url}")
        assert inside_viewport(page, "#send")
        assert inside_viewport(page, "#composer-text")
        # The thread scrolls, the page does not.
        assert page.evaluate("document.scrollingElement.scrollHeight") <= viewport["height"]
    shot(page, "chat")
    assert errors == []


@pytest.mark.parametrize("viewport", PHONES, ids=["390x844", "360x640"])
def test_phone_drawer_closes_by_button_escape_and_tap_outside(
    ada, live_server_url, browser, viewport
):
    off_loop(lambda: conversation_with(ada, "Hello", title="First chat"))
    page, errors = logged_in_page(browser, live_server_url, ada, viewport)
    page.goto(f"{live_server_url}/chat/")
    assert not page.is_visible("#chat-sidebar")

    page.click("#sidebar-toggle")
    assert page.is_visible("#chat-sidebar >> text=First chat")
    shot(page, "drawer-open")
    page.click("#sidebar-toggle")  # not covered by the drawer it opened
    assert not page.is_visible("#chat-sidebar")

    page.click("#sidebar-toggle")
    page.keyboard.press("Escape")
    assert not page.is_visible("#chat-sidebar")
    assert page.get_attribute("#sidebar-toggle", "aria-expanded") == "false"

    page.click("#sidebar-toggle")
    page.mouse.click(viewport["width"] - 15, viewport["height"] // 2)  # beside the drawer
    assert not page.is_visible("#chat-sidebar")
    assert errors == []


def test_desktop_keeps_the_full_navigation_and_sidebar(ada, live_server_url, browser):
    chat = off_loop(lambda: conversation_with(ada, *[f"Question {i}? " * 20 for i in range(12)]))
    page, errors = logged_in_page(browser, live_server_url, ada, DESKTOP)
    assert not page.is_visible("#nav-toggle")
    assert nav_links_visible(page) == len(PAGES)
    topbar = page.locator(".topbar").bounding_box()
    assert topbar is not None and topbar["height"] < 60
    page.goto(f"{live_server_url}/chat/{chat.id}/")
    assert page.is_visible("#chat-sidebar")
    assert not page.is_visible("#sidebar-toggle")
    assert inside_viewport(page, "#send")
    assert page.evaluate("document.scrollingElement.scrollHeight") <= DESKTOP["height"]
    shot(page, "chat")
    assert errors == []


@pytest.mark.parametrize("viewport", [PHONES[0], DESKTOP], ids=["phone", "desktop"])
def test_a_blank_rename_says_so_in_the_options_panel_and_keeps_the_composer(
    ada, live_server_url, browser, viewport
):
    chat = off_loop(lambda: conversation_with(ada, "Hello", title="Kept title"))
    page, errors = logged_in_page(browser, live_server_url, ada, viewport)
    page.goto(f"{live_server_url}/chat/{chat.id}/")
    page.click(".conv-menu summary")
    page.fill("#rename-title", "   ")
    with page.expect_navigation():
        page.click(".conv-menu button >> text=Rename")
    assert page.is_visible(".conv-menu-body >> text=A title needs at least one visible character.")
    assert page.locator("body > .flash").count() == 0
    assert page.inner_text("#chat-title") == "Kept title"
    assert inside_viewport(page, "#send")
    assert inside_viewport(page, ".conv-menu-body .flash")
    shot(page, "rename-blank")
    assert errors == []


@pytest.mark.parametrize("viewport", [PHONES[0], DESKTOP], ids=["phone", "desktop"])
def test_the_account_page_shows_a_refusal_where_it_jumps_to(
    ada, live_server_url, browser, viewport
):
    page, errors = logged_in_page(browser, live_server_url, ada, viewport)
    page.goto(f"{live_server_url}/accounts/")
    page.fill("#id_delete_password", "not my password")
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.click("#delete button.danger")
    assert page.url.endswith("/accounts/#delete")
    assert page.is_visible("#delete .flash >> text=That is not your password.")
    assert inside_viewport(page, "#delete .flash")
    shot(page, "account-refused")
    assert errors == []


@pytest.mark.parametrize("viewport", [PHONES[1], DESKTOP], ids=["phone", "desktop"])
def test_error_pages_are_the_sites_own(ada, live_server_url, browser, viewport):
    page, errors = logged_in_page(browser, live_server_url, ada, viewport)
    for url, status, heading in [
        ("/skills/nonexistent/", 404, "Page not found"),
        ("/accounts/forget-memory/", 405, "This address only takes a form"),
    ]:
        response = page.goto(f"{live_server_url}{url}")
        assert response is not None and response.status == status
        assert page.inner_text("main h1") == heading
        assert page.is_visible(".topbar .brand")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= viewport["width"]
        shot(page, f"error-{status}")
    # The browser logs the 404 and 405 responses themselves as console errors.
    assert [e for e in errors if "status of 40" not in e] == []
