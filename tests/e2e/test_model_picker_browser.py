"""A person picks a model for a new chat, switches mid-chat and sees the marker, on a
desktop and a phone."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import DESKTOP, PHONE, SCREENSHOTS, logged_in_page, off_loop

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def add_models(base_url: str) -> tuple[str, str]:
    from model_catalog.models import ModelEntry
    from model_catalog.services import model_entry_save

    refs = []
    for name in ("Second model", "Third model"):
        row = ModelEntry(name=name, model_id="scripted", base_url=base_url)
        refs.append(str(model_entry_save(entry=row, new_api_key="sk-browser-secret").pk))
    return refs[0], refs[1]


SMALL_PHONE = {"width": 360, "height": 640}


@pytest.mark.parametrize(
    "viewport", [DESKTOP, PHONE, SMALL_PHONE], ids=["desktop", "phone", "small-phone"]
)
def test_pick_a_model_then_switch_and_see_the_marker(
    owner, live_server_url, llm_for_server, browser, viewport
):
    second, third = off_loop(lambda: add_models(llm_for_server.base_url))
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.goto(f"{live_server_url}/chat/")
    picker = page.locator("#model-picker")
    assert picker.is_visible()
    box = picker.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    assert box["y"] + box["height"] <= viewport["height"]
    send = page.locator("#send").bounding_box()
    assert send and send["x"] + send["width"] <= viewport["width"]
    assert send["y"] + send["height"] <= viewport["height"]
    options = page.locator("#model-picker option").all_inner_texts()
    assert options == ["scripted", "Second model", "Third model"]
    assert (
        "sk-browser-secret" not in page.content() and llm_for_server.base_url not in page.content()
    )

    picker.select_option(second)
    page.fill("#composer-text", "Hello there")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-assistant .md", timeout=20000)
    page.wait_for_selector("#send:not([disabled])", timeout=20000)

    from sessions_app.models import Session

    config = off_loop(lambda: Session.objects.get(owner=owner).model_config)
    assert config["entry"] == second

    page.locator("#model-picker").select_option(third)
    marker = page.locator(".model-marker")
    marker.wait_for(timeout=20000)
    assert marker.inner_text() == "Switched to Third model"
    assert marker.is_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = f"{viewport['width']}x{viewport['height']}"
    page.screenshot(path=str(SCREENSHOTS / f"model-picker-{name}.png"))
    page.reload()
    assert page.locator(".model-marker").inner_text() == "Switched to Third model"
    assert page.locator("#model-picker").input_value() == third
    assert errors == []
