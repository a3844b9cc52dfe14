"""The Account page's ChatGPT/Claude import with "Let Hermes learn from this history", in
Chromium at desktop and phone sizes: the choice is there and off, the upload imports and
learns (tasks inline, the scripted model over HTTP), the panel says what was learned; a
learning under way shows its progress and follows it without a reload."""

from __future__ import annotations

import json

import pytest

from memory.models import MemoryEntry
from privacy.models import ChatImportJob
from tests.conftest import wait_for
from tests.e2e.conftest import (
    DESKTOP,
    PHONE,
    SCREENSHOTS,
    box_inside_viewport,
    logged_in_page,
    off_loop,
)
from tests.privacy.learning import Reviewer, claude_chat

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_an_upload_with_learning_shows_what_was_learned(
    owner, server_url, llm_for_server, browser, tmp_path, viewport
):
    Reviewer(llm_for_server, lambda text: ["Keeps bees in Lyon"] if "mkbees" in text else [])
    export = tmp_path / "conversations.json"
    export.write_text(
        json.dumps([claude_chat("u-1", "Bees", ["I keep bees on my balcony in Lyon mkbees."])])
    )
    page, errors = logged_in_page(browser, server_url, owner, viewport)
    page.goto(f"{server_url}/accounts/#import-chats")
    choice = page.locator("input[name=learn]")
    choice.scroll_into_view_if_needed()
    box_inside_viewport(page, page.locator(".learn-choice label"))
    assert not choice.is_checked()
    assert "At most 60 model calls" in page.inner_text(".learn-choice")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"learn-choice-{viewport['width']}.png"))

    page.set_input_files("#id_export", str(export))
    choice.check()
    page.click("#import-chats ~ form button[type=submit]")
    page.wait_for_selector(".learn-result")

    result = page.locator(".chat-import .learn-result")
    result.scroll_into_view_if_needed()
    box_inside_viewport(page, result)
    assert result.inner_text().startswith("Learned 1 note, 0 waiting for your approval")
    assert "Read 1 of the 1 conversation(s)" in page.inner_text(".chat-learning")
    page.screenshot(path=str(SCREENSHOTS / f"learn-result-{viewport['width']}.png"))
    assert off_loop(lambda: list(MemoryEntry.objects.values_list("content", flat=True))) == [
        "Keeps bees in Lyon"
    ]
    assert errors == []


def test_a_learning_under_way_shows_its_progress_and_the_outcome(owner, live_server_url, browser):
    job = off_loop(
        lambda: ChatImportJob.objects.create(
            owner=owner,
            status="done",
            progress=100,
            report=["Conversations: 3 imported, 0 already there (12 messages)."],
            learn=True,
            learn_status="running",
            learning={"progress": 20, "stage": "Conversations 3/15"},
        )
    )
    jobs = ChatImportJob.objects.filter(pk=job.pk)
    page, errors = logged_in_page(browser, live_server_url, owner, PHONE)
    page.goto(f"{live_server_url}/accounts/#import-chats")
    loads: list[str] = []
    page.on("load", lambda _: loads.append(page.url))
    bar = page.locator(".learn-progress")
    bar.scroll_into_view_if_needed()
    box_inside_viewport(page, bar)
    assert bar.get_attribute("value") == "20"
    page.screenshot(path=str(SCREENSHOTS / "learn-running-390.png"))

    off_loop(lambda: jobs.update(learning={"progress": 60, "stage": "Conversations 9/15"}))
    wait_for(
        lambda: bar.get_attribute("value") == "60",
        timeout=15,
        what="the learning's bar to follow it",
    )
    assert page.inner_text(".learn-stage") == "· Conversations 9/15"
    assert loads == []

    done = {"notes": 4, "pending": 2, "lines": ["Memory: 4 note(s) saved, 2 waiting."]}
    with page.expect_event("load", timeout=15_000):
        off_loop(lambda: jobs.update(learn_status="done", learning=done))
    wait_for(
        lambda: "Learned 4 notes, 2 waiting for your approval" in page.inner_text("#chat-imports"),
        timeout=15,
        what="the page to show what was learned",
    )
    assert len(loads) == 1
    assert page.get_attribute(".learn-result a", "href") == f"/memory/?source_import={job.pk}"
    assert errors == []
