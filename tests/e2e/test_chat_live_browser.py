"""The chat page between reloads: tool chips land under their own answer, a new chat gets
its controls (Inspect, Options, the temporary banner) at once, and an over-long message is
never cut or lost — at desktop and phone sizes, each checked again after a reload."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import wait_for
from tests.e2e.conftest import DESKTOP, PHONE, SCREENSHOTS, logged_in_page

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SIZES = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
LIMIT = 32000  # HERMES_MAX_MESSAGE_CHARS' default, which the server under test uses


def send(page, text: str) -> None:
    page.fill("#composer-text", text)
    page.click("#send")


def wait_answered(page, answers: int) -> None:
    """Until `answers` finished answers show (rendered by the server, nothing streaming)."""
    wait_for(
        lambda: (
            page.locator(".msg-assistant .md").count() == answers
            and page.locator(".msg-streaming").count() == 0
            and page.locator("#stop").is_hidden()
        ),
        timeout=20,
        what=f"{answers} finished answers",
    )


def chips_below(page, text: str) -> tuple[int, int]:
    """(chips above the user message saying `text`, chips below it), by position on screen."""
    user_y = page.locator(".msg-user", has_text=text).bounding_box()["y"]
    ys = [box["y"] for box in (c.bounding_box() for c in page.locator(".chip").all()) if box]
    return sum(y < user_y for y in ys), sum(y > user_y for y in ys)


@SIZES
def test_tool_chips_show_only_under_the_answer_that_used_the_tool(
    owner, live_server_url, llm_for_server, browser, viewport
):
    llm_for_server.add_rule(
        lambda body: body["messages"][-1].get("role") == "tool", reply="Noted: you prefer tea."
    )
    llm_for_server.add_rule(
        "remember",
        tool_calls=[
            {
                "name": "memory",
                "arguments": {"action": "add", "target": "user", "content": "Prefers tea"},
            }
        ],
    )
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.goto(f"{live_server_url}/chat/")
    send(page, "Hello there")
    wait_answered(page, 1)
    assert page.locator(".chip").count() == 0

    llm_for_server.chunk_delay = 0.05  # the answer after the tool streams while we look
    send(page, "Please remember that I prefer tea")
    page.wait_for_selector(".chip", timeout=20000)
    assert chips_below(page, "Please remember") == (0, 1)
    wait_answered(page, 2)
    assert page.locator(".chip").count() == 1
    assert chips_below(page, "Please remember") == (0, 1)
    assert re.match(r"memory · About you: Entry added\. \(", page.inner_text(".chip summary"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"chat-tool-chips-{viewport['width']}.png"))

    page.reload()
    wait_answered(page, 2)
    assert page.locator(".chip").count() == 1
    assert chips_below(page, "Please remember") == (0, 1)
    assert errors == []


@SIZES
def test_a_new_chat_has_inspect_and_options_without_a_reload(
    owner, live_server_url, llm_for_server, browser, viewport
):
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.goto(f"{live_server_url}/chat/")
    assert page.locator(".inspect-link").is_hidden()
    send(page, "Hello there")
    wait_answered(page, 1)
    session_id = page.url.rstrip("/").rsplit("/", 1)[1]

    inspect = page.locator(".inspect-link")
    assert inspect.is_visible()
    assert inspect.get_attribute("href") == f"/chat/{session_id}/inspect/"
    page.click(".conv-menu summary")
    menu = page.locator(".conv-menu-body")
    for control in ("#rename-title", "button:has-text('Pin to top')", "button:has-text('Delete')"):
        assert menu.locator(control).is_visible(), control
    box = page.locator(".conv-menu-body").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"chat-new-options-{viewport['width']}.png"))

    page.fill("#rename-title", "Tea talk")
    page.click(".conv-menu button:has-text('Rename')")
    page.wait_for_url(f"{live_server_url}/chat/{session_id}/")
    assert page.inner_text("#chat-title") == "Tea talk"
    assert page.locator("#conv-list .conv", has_text="Tea talk").count() == 1

    page.click(".conv-menu summary")
    page.click("button:has-text('Pin to top')")
    page.wait_for_url(f"{live_server_url}/chat/{session_id}/")
    page.click(".conv-menu summary")
    assert page.locator("button:has-text('Unpin')").is_visible()
    assert errors == []


@SIZES
def test_a_new_temporary_chat_shows_its_banner_without_a_reload(
    owner, live_server_url, llm_for_server, browser, viewport
):
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.goto(f"{live_server_url}/chat/")
    banner = page.locator("#temporary-banner")
    assert banner.is_hidden()
    page.check("#temporary")
    send(page, "Just between us")
    wait_answered(page, 1)
    assert banner.is_visible()
    assert "Temporary chat" in banner.inner_text()
    box = banner.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    page.reload()
    assert page.locator("#temporary-banner").is_visible()
    assert errors == []


@SIZES
def test_an_over_long_paste_is_kept_whole_and_not_sent_until_trimmed(
    owner, live_server_url, llm_for_server, browser, viewport
):
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.goto(f"{live_server_url}/chat/")
    pasted = ("All work and no play makes a long paste. " * 1300)[:50000]
    page.focus("#composer-text")
    page.keyboard.insert_text(pasted)

    assert page.input_value("#composer-text") == pasted
    warning = page.locator("#composer-limit")
    assert warning.is_visible()
    assert "50,000" in warning.inner_text() and "32,000" in warning.inner_text()
    assert page.locator("#send").is_disabled()
    box = warning.bounding_box()
    assert box["y"] + box["height"] <= viewport["height"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"chat-too-long-{viewport['width']}.png"))

    page.keyboard.press("Enter")
    page.wait_for_timeout(500)
    assert page.locator(".msg-user").count() == 0
    assert llm_for_server.requests == []
    assert page.input_value("#composer-text") == pasted

    trimmed = pasted[:LIMIT]
    page.fill("#composer-text", trimmed)
    assert page.locator("#send").is_enabled()
    page.click("#send")
    wait_answered(page, 1)
    assert page.locator(".msg-user").count() == 1
    assert page.inner_text(".msg-user .msg-body").strip() == trimmed.strip()
    assert page.input_value("#composer-text") == ""
    assert errors == []


def test_a_message_the_server_refuses_stays_in_the_composer(
    owner, live_server_url, llm_for_server, browser
):
    """A page whose script thinks the text fits (an older cached one) still loses nothing:
    the server's refusal is shown and the text returns to the composer."""
    page, errors = logged_in_page(browser, live_server_url, owner)

    def lengthen(ws) -> None:
        server = ws.connect_to_server()

        def to_server(message) -> None:
            data = json.loads(message)
            if data.get("type") == "chat.send":
                data["text"] = data["text"] * (LIMIT // len(data["text"]) + 1)
            server.send(json.dumps(data))

        ws.on_message(to_server)

    page.route_web_socket(re.compile(r"/ws/chat/$"), lengthen)
    page.goto(f"{live_server_url}/chat/")
    send(page, "Keep this text safe")
    error = page.locator(".msg-error[role=alert]")
    error.wait_for(timeout=20000)
    assert "the limit is 32,000" in error.inner_text()
    assert page.input_value("#composer-text") == "Keep this text safe"
    assert page.locator(".msg-user").count() == 0
    assert page.locator("#send").is_enabled()
    assert llm_for_server.requests == []
    assert errors == []
