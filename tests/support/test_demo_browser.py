"""The Sessions page's "Summarise" in a real browser against the demo script of
`manage.py fake_llm`: a chat in which the person said "remember" gets a visible recap."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devtools.scripted_llm import ScriptedLLM, build_demo
from tests.e2e.conftest import (  # noqa: F401
    SCREENSHOTS,
    browser,
    live_server_env,
    live_server_url,
    logged_in_page,
    off_loop,
    server_url,
)
from tests.search.conftest import make_chat

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REMEMBER = "Please remember that I prefer tea."


@pytest.fixture
def llm_for_server() -> Iterator[ScriptedLLM]:
    """The demo script `fake_llm` serves, in place of the bare scripted model."""
    with build_demo(chunk_delay=0) as llm:
        yield llm


def test_summarise_a_chat_that_said_remember_shows_the_recap(
    owner,
    server_url,  # noqa: F811
    browser,  # noqa: F811
):
    chat = off_loop(
        lambda: make_chat(
            owner,
            [
                ("user", REMEMBER),
                ("assistant", "", {"tool_calls": [{"id": "c1", "function": {"name": "memory"}}]}),
                ("tool", '{"ok": true}', {"tool_call_id": "c1", "tool_name": "memory"}),
                ("assistant", "Done — I've saved that to memory."),
            ],
            title="Tea",
        )
    )
    page, errors = logged_in_page(browser, server_url, owner)
    page.goto(f"{server_url}/sessions/?q=tea")

    result = page.locator(f"#result-{chat.id}")
    result.get_by_role("button", name="Summarise").click()
    summary = result.locator(".summary", has_text="Recap from the")
    summary.wait_for(timeout=20_000)
    assert REMEMBER in summary.inner_text()
    assert "failed" not in result.inner_text().lower()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in ((1366, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        summary.scroll_into_view_if_needed()
        box = summary.bounding_box()
        assert summary.is_visible() and box is not None
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
        page.screenshot(path=str(SCREENSHOTS / f"demo-summary-{width}.png"))
    assert errors == []
