"""The Sessions page in a real browser: highlighted results, the "Summarise" action by
keyboard, and a summary finishing in the background showing up by polling."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.models import Message, SearchSummary
from sessions_app.search.summarise import query_hash
from tests.e2e.conftest import (  # noqa: F401
    DESKTOP,
    PHONE,
    browser,
    live_server_env,
    live_server_url,
    llm_for_server,
    logged_in_page,
    off_loop,
    server_url,
)

from .conftest import make_chat

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_search_summarise_by_keyboard_and_poll(
    owner,
    server_url,  # noqa: F811
    llm_for_server,  # noqa: F811
    browser,  # noqa: F811
):
    def seed() -> tuple[Any, Any, Any]:
        chat = make_chat(
            owner,
            [
                ("user", "how do we rotate the vault token?"),
                ("assistant", "Use <b>vault</b> rotate."),
            ],
            title="Vault rotation",
        )
        other = make_chat(
            owner, [("user", "vault backup schedule")], title="Vault backups", start=50
        )
        pending = SearchSummary.objects.create(
            owner=owner,
            session=other,
            query="vault",
            query_hash=query_hash("vault"),
            last_message_id=Message.objects.filter(session=other).latest("id").id,
        )
        return chat, other, pending

    chat, other, pending = off_loop(seed)
    llm_for_server.add_rule("Search topic:", reply="Rotation is done with vault rotate.")

    page, errors = logged_in_page(browser, server_url, owner)
    page.goto(f"{server_url}/")
    page.fill("#dashboard-search", "vault")
    page.keyboard.press("Enter")
    page.wait_for_url("**/sessions/?q=vault")

    result = page.locator(f"#result-{chat.id}")
    assert result.locator("mark").first.inner_text().lower() == "vault"
    assert "<b>vault</b>" in result.inner_text()  # message text shown as text

    # The background summary of the other result lands while the page is open.
    off_loop(
        lambda: SearchSummary.objects.filter(id=pending.id).update(
            status="done", summary="Backups nightly."
        )
    )
    page.locator(f"#result-{other.id} .summary", has_text="Backups nightly.").wait_for(
        timeout=15_000
    )

    button = result.locator("form.summarise-form button")
    button.focus()
    page.keyboard.press("Enter")
    result.locator(".summary", has_text="Rotation is done with vault rotate.").wait_for(
        timeout=20_000
    )
    assert page.url.endswith("/sessions/?q=vault")  # no page reload
    assert errors == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_snippets_read_as_text_with_highlights(
    owner,
    server_url,  # noqa: F811
    browser,  # noqa: F811
    viewport,
    tmp_path,
):
    calls = [
        {
            "id": "call_x1",
            "type": "function",
            "function": {"name": "memory", "arguments": '{"content": "ferryboat to Porto"}'},
        }
    ]
    answer = "## Plan\n\n- **Book** the `ferryboat` tickets\n- see [the site](https://x.example)"

    def seed() -> Any:
        return make_chat(
            owner,
            [
                ("user", "what about the ferries?"),
                ("assistant", answer),
                ("assistant", "", {"tool_calls": calls, "status": "complete"}),
            ],
            title="Porto ferries",
        )

    chat = off_loop(seed)
    page, errors = logged_in_page(browser, server_url, owner, viewport)
    page.goto(f"{server_url}/sessions/?q=ferryboat")
    result = page.locator(f"#result-{chat.id}")
    snippets = result.locator(".snippet")
    assert snippets.count() == 2
    texts = [snippets.nth(i).inner_text() for i in range(2)]
    for text in texts:
        assert not any(s in text for s in ("**", "`", "##", "](", "call_", '{"')), text
    assert any("Book the ferryboat tickets" in t for t in texts)
    assert any(t.startswith("memory: ferryboat to Porto") for t in texts)
    marks = result.locator("mark")
    assert {marks.nth(i).inner_text() for i in range(marks.count())} == {"ferryboat"}
    box = result.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    page.screenshot(path=str(tmp_path / f"search-snippets-{viewport['width']}.png"), full_page=True)
    assert errors == []
