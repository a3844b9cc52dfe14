"""The model server is down (nothing listens at OPENAI_BASE_URL): each sent message shows
once, with one note under it saying the connection was refused — live and after a reload."""

from __future__ import annotations

import pytest

from tests.conftest import free_port
from tests.e2e.conftest import DESKTOP, PHONE, SCREENSHOTS, logged_in_page

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# A port nothing listens on (one for the module: its tests share one server).
CLOSED_PORT = free_port()


@pytest.fixture
def live_server_env() -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"http://127.0.0.1:{CLOSED_PORT}/v1"}


def wait_failed(page, answers: int) -> None:
    page.locator(".msg-assistant .msg-error").nth(answers - 1).wait_for(timeout=20000)
    page.locator("#stop").wait_for(state="hidden", timeout=5000)
    page.wait_for_timeout(300)  # room for a late duplicate to show up


def assert_once_each(page, sent: list[str]) -> None:
    users = page.locator(".msg-user")
    assert users.count() == len(sent)
    assert [u.locator(".msg-body").inner_text().strip() for u in users.all()] == sent
    errors = page.locator(".msg-error")
    assert errors.count() == len(sent)
    for note in errors.all():
        assert note.is_visible()
        assert "refused the connection" in note.inner_text()
        assert "in time" not in note.inner_text()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_message_to_a_stopped_model_shows_once_with_one_error(
    owner, live_server_url, browser, viewport
):
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.goto(f"{live_server_url}/chat/")
    page.fill("#composer-text", "Is anyone there?")
    page.click("#send")
    wait_failed(page, 1)
    assert_once_each(page, ["Is anyone there?"])

    page.fill("#composer-text", "Hello again")
    page.click("#send")
    wait_failed(page, 2)
    assert_once_each(page, ["Is anyone there?", "Hello again"])
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"chat-model-down-{viewport['width']}.png"))

    page.reload()
    page.locator(".msg-error").nth(1).wait_for(timeout=10000)
    assert_once_each(page, ["Is anyone there?", "Hello again"])
    assert errors == []
