"""Issue 14's chat-app habits in Chromium, at desktop and phone sizes: the theme switch in the
top bar (Menu on phones) remembered across reloads, the sidebar's filter, its next pages
loaded as it scrolls, and the keyboard shortcuts with their ? sheet."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.models import Session
from tests.conftest import wait_for
from tests.e2e.conftest import DESKTOP, PHONE, SCREENSHOTS, logged_in_page, off_loop

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SIZES = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
LIGHT_BG = "rgb(246, 247, 249)"
DARK_BG = "rgb(20, 23, 28)"


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{size['width']}x{size['height']}.png"))


def background(page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def inside_viewport(page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    return (
        box is not None
        and 0 <= box["x"]
        and 0 <= box["y"]
        and box["x"] + box["width"] <= size["width"]
        and box["y"] + box["height"] <= size["height"]
    )


def choose_theme(page, value: str) -> None:
    """Through the Menu on a phone, straight from the top bar on a desktop."""
    if page.locator("#nav-toggle").is_visible():
        page.click("#nav-toggle")
    button = f".theme-switch button[value={value}]"
    assert page.locator(button).is_visible() and inside_viewport(page, button)
    page.click(button)
    wait_for(
        lambda: page.get_attribute(button, "aria-pressed") == "true",
        timeout=10,
        what=f"the {value} theme to be chosen",
    )


def open_sidebar(page) -> None:
    if page.locator("#sidebar-toggle").is_visible():
        page.click("#sidebar-toggle")


def visible_conversations(page) -> int:
    return page.locator("#chat-sidebar li.conv:visible").count()


@SIZES
def test_the_theme_follows_the_system_until_chosen_and_is_remembered(
    owner, live_server_url, browser, viewport
):
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.emulate_media(color_scheme="dark")
    page.goto(f"{live_server_url}/chat/")
    assert background(page) == DARK_BG  # System, the default, follows the system's dark

    choose_theme(page, "light")
    assert background(page) == LIGHT_BG  # repainted in place
    shot(page, "theme-menu-light")
    page.reload()
    assert background(page) == LIGHT_BG  # and rendered so by the server
    assert page.get_attribute("html", "data-theme") == "light"

    page.emulate_media(color_scheme="light")
    choose_theme(page, "dark")
    shot(page, "theme-dark-chat")
    page.goto(f"{live_server_url}/memory/")
    assert background(page) == DARK_BG
    shot(page, "theme-dark-memory")
    choose_theme(page, "system")
    assert background(page) == LIGHT_BG
    assert errors == []


@SIZES
def test_the_sidebar_filters_and_loads_more_as_it_scrolls(
    owner, outsider, live_server_url, browser, viewport
):
    def create() -> None:
        now = timezone.now()
        for who, prefix in ((owner, "Chat"), (outsider, "Chat of oscar")):
            Session.objects.bulk_create(
                Session(owner=who, title=f"{prefix} {i}", last_activity_at=now - timedelta(i))
                for i in range(120)
            )

    off_loop(create)
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.goto(f"{live_server_url}/chat/")
    open_sidebar(page)
    assert visible_conversations(page) == 50

    # Only Chat 11 is loaded yet; the server adds Chat 110 to Chat 119.
    page.fill("#conv-filter", "chat 11")
    wait_for(lambda: visible_conversations(page) == 11, timeout=10, what="11 matches")
    shot(page, "sidebar-filter")
    page.fill("#conv-filter", "no such chat")
    wait_for(lambda: page.locator("#conv-nomatch").is_visible(), timeout=10, what="No match")
    assert visible_conversations(page) == 0
    page.fill("#conv-filter", "")
    assert visible_conversations(page) == 50

    page.locator("#conv-more").scroll_into_view_if_needed()
    wait_for(lambda: visible_conversations(page) == 100, timeout=10, what="the second page")
    page.locator("#conv-more").scroll_into_view_if_needed()
    wait_for(lambda: visible_conversations(page) == 120, timeout=10, what="the last page")
    assert page.locator("#conv-more").is_hidden()
    assert "oscar" not in page.inner_text("#chat-sidebar")
    titles = page.locator("#conv-list li.conv").all_inner_texts()
    assert titles == [f"Chat {i}" for i in range(120)]
    assert errors == []


@SIZES
def test_shortcuts_stop_focus_and_start_a_chat_and_are_listed_on_a_sheet(
    owner, live_server_url, llm_for_server, browser, viewport
):
    llm_for_server.add_rule("Write a long story", reply=" ".join(f"w{i}" for i in range(2000)))
    llm_for_server.chunk_delay = 0.03
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.goto(f"{live_server_url}/chat/")
    page.fill("#composer-text", "Write a long story")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-streaming .streaming", timeout=20000)
    page.click("#chat-title")  # Esc works outside the message box too
    page.keyboard.press("Escape")
    page.wait_for_selector(".msg-note >> text=Answer stopped.", timeout=20000)
    assert page.locator("#stop").is_hidden()

    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible() and inside_viewport(page, "#shortcuts")
    assert "New chat" in page.inner_text("#shortcuts")
    shot(page, "shortcuts-sheet")
    page.keyboard.press("Escape")
    assert page.locator("#shortcuts").is_hidden()
    open_sidebar(page)
    page.click("text=Keyboard shortcuts (?)")
    assert page.locator("#shortcuts").is_visible()
    page.click("#shortcuts >> text=Close")
    assert page.locator("#shortcuts").is_hidden()

    page.click("#chat-title")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "composer-text"
    assert page.input_value("#composer-text") == ""

    conversation = page.url
    assert conversation.rstrip("/") != f"{live_server_url}/chat"
    page.keyboard.press("Control+Shift+O")
    page.wait_for_url(f"{live_server_url}/chat/")
    assert page.inner_text("#chat-title") == "New chat"
    assert errors == []
