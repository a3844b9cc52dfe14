"""Edit and branch in Chromium at desktop and phone sizes: edit & resend shows ‹2/2›, going
back to ‹1/2› shows the old answer, a reload keeps the selection, and Regenerate keeps the
earlier answer as ‹1/2› of the answer."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import DESKTOP, PHONE, SCREENSHOTS, box_inside_viewport, logged_in_page

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TIMEOUT = 20000


def user_text(page) -> str:
    return page.inner_text(".msg-user .msg-body").strip()


def answer_text(page) -> str:
    return page.inner_text(".msg-assistant .md").strip()


def wait_answer(page, text: str) -> None:
    page.wait_for_selector(f".msg-assistant .md >> text={text}", timeout=TIMEOUT)
    page.wait_for_selector("#stop", state="hidden", timeout=TIMEOUT)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_edit_switch_reload_and_regenerate(owner, server_url, llm_for_server, browser, viewport):
    llm_for_server.add_rule("Plan a trip", reply="Answer about the trip.", times=1)
    llm_for_server.add_rule("Plan a holiday", reply="Answer about the holiday.", times=1)
    llm_for_server.add_rule("Plan a trip", reply="Another answer about the trip.")
    page, errors = logged_in_page(browser, server_url, owner, viewport)
    name = "desktop" if viewport == DESKTOP else "phone"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{server_url}/chat/")
    page.fill("#composer-text", "Plan a trip")
    page.keyboard.press("Enter")
    wait_answer(page, "Answer about the trip.")

    # Edit: the inline editor, Esc cancels, then Save & send.
    edit = page.locator(".msg-user .msg-edit")
    box = box_inside_viewport(page, edit)
    if viewport == PHONE:
        assert box["height"] >= 44 and box["width"] >= 44
    edit.click()
    editor = page.locator(".msg-editor textarea")
    assert editor.input_value() == "Plan a trip"
    page.keyboard.press("Escape")
    assert page.locator(".msg-editor").count() == 0
    assert page.locator(".msg-user .msg-body").is_visible()
    edit.click()
    editor.fill("Plan a holiday")
    box_inside_viewport(page, page.locator(".msg-editor button.primary"))
    page.screenshot(path=str(SCREENSHOTS / f"branches-editor-{name}.png"))
    page.click(".msg-editor button.primary")
    wait_answer(page, "Answer about the holiday.")
    assert user_text(page) == "Plan a holiday"
    assert page.inner_text(".msg-user .branch-pos") == "2/2"
    assert page.locator(".msg-assistant").count() == 1
    # The model saw only the edited message, nothing of the path it replaced.
    holiday = next(r for r in llm_for_server.requests if "Plan a holiday" in str(r["messages"]))
    assert "Plan a trip" not in str(holiday["messages"])
    assert "Answer about the trip" not in str(holiday["messages"])
    page.screenshot(path=str(SCREENSHOTS / f"branches-edited-{name}.png"))

    # Back to ‹1/2›: the old message with its old answer.
    previous = page.locator(".msg-user .branch-prev")
    assert previous.get_attribute("aria-label") == "Previous version"
    box = box_inside_viewport(page, previous)
    if viewport == PHONE:
        assert box["height"] >= 44 and box["width"] >= 44
    previous.click()
    page.wait_for_selector(".msg-user .branch-pos >> text=1/2", timeout=TIMEOUT)
    assert user_text(page) == "Plan a trip"
    assert answer_text(page) == "Answer about the trip."
    assert page.locator(".msg-user .branch-next").is_enabled()
    assert page.locator(".msg-user .branch-prev").is_disabled()

    page.reload()
    page.wait_for_selector(".msg-user .branch-pos", timeout=TIMEOUT)
    assert page.inner_text(".msg-user .branch-pos") == "1/2"
    assert user_text(page) == "Plan a trip"
    assert answer_text(page) == "Answer about the trip."

    # Regenerate keeps the earlier answer as an alternative of the answer.
    page.click("#regenerate")
    wait_answer(page, "Another answer about the trip.")
    page.wait_for_selector(".msg-assistant .branch-pos >> text=2/2", timeout=TIMEOUT)
    assert page.locator(".msg-assistant").count() == 1
    box_inside_viewport(page, page.locator(".msg-assistant .branch-prev"))
    page.screenshot(path=str(SCREENSHOTS / f"branches-regenerated-{name}.png"))
    page.click(".msg-assistant .branch-prev")
    page.wait_for_selector(".msg-assistant .branch-pos >> text=1/2", timeout=TIMEOUT)
    assert answer_text(page) == "Answer about the trip."
    # Keyboard: the arrows are buttons reachable with Tab and pressed with Enter.
    page.focus(".msg-assistant .branch-next")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-assistant .branch-pos >> text=2/2", timeout=TIMEOUT)
    assert answer_text(page) == "Another answer about the trip."
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    assert scroll_width <= viewport["width"]
    assert errors == []
