"""The Memory page in Chromium at desktop and phone sizes: notes learned from an imported
history say which import they came from, the filter shows one import's notes alone, and one
confirmed click removes them all while the other notes stay."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memory.models import MemoryEntry
from memory.services import memory_add
from privacy.models import ChatImportJob
from tests.e2e.conftest import (
    DESKTOP,
    PHONE,
    SCREENSHOTS,
    box_inside_viewport,
    logged_in_page,
    off_loop,
)
from tests.privacy.test_learned_notes import learn

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def seed(owner) -> tuple[ChatImportJob, ChatImportJob]:
    first = ChatImportJob.objects.create(
        owner=owner, status="done", source="chatgpt", learn=True, learn_status="done"
    )
    second = ChatImportJob.objects.create(
        owner=owner, status="done", source="claude", learn=True, learn_status="done"
    )
    learn(owner, first, "Keeps bees on a balcony in Lyon", "Sells the honey at the market")
    learn(owner, first, "Their hives face south; check them on Sundays", target="memory")
    learn(owner, second, "Drinks green tea, never coffee")
    memory_add(user=owner, target="user", content="Prefers short answers")
    return first, second


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_notes_of_one_import_are_shown_alone_and_removed_with_one_confirmation(
    owner, live_server_url, browser, viewport
):
    first, _second = off_loop(lambda: seed(owner))
    when = f"{timezone.localtime(first.created_at):%Y-%m-%d}"
    label = f"Learned from your ChatGPT import of {when}"
    width = viewport["width"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    # The import's panel on the Account page offers the same removal and links here.
    page.goto(f"{live_server_url}/accounts/#chat-import-{first.pk}")
    offer = page.locator(f"#chat-import-{first.pk} .chat-learned button")
    offer.scroll_into_view_if_needed()
    box_inside_viewport(page, offer)
    assert offer.inner_text() == "Remove the 3 notes learned from this import"
    page.screenshot(path=str(SCREENSHOTS / f"account-learned-notes-{width}.png"))

    page.goto(f"{live_server_url}/memory/")

    # Each learned note names its import, linked to the import's panel.
    tag = page.locator(f"#list-user .entry .tag a:text-is('{label}')")
    assert tag.count() == 2
    assert tag.first.get_attribute("href") == f"/accounts/#chat-import-{first.pk}"
    assert page.locator(".entry").count() == 5
    chip = page.locator(f".writer-filter a[href='?source_import={first.pk}']")
    chip.scroll_into_view_if_needed()
    box_inside_viewport(page, chip)
    assert chip.inner_text() == f"{label} 3"
    page.screenshot(path=str(SCREENSHOTS / f"memory-filter-{width}.png"), full_page=True)

    chip.click()
    page.wait_for_url(f"**/memory/?source_import={first.pk}")
    assert chip.get_attribute("aria-current") == "true"
    entries = page.locator(".entry")
    assert entries.count() == 3
    assert "Drinks green tea" not in page.inner_text(".memory-lists")
    assert "Prefers short answers" not in page.inner_text(".memory-lists")
    banner = page.locator(".shown-banner")
    assert banner.inner_text().startswith(
        f"Showing 3 entries learned from your ChatGPT import of {when}."
    )
    remove = banner.locator("button", has_text="Remove these 3 notes")
    box_inside_viewport(page, remove)
    page.screenshot(path=str(SCREENSHOTS / f"memory-one-import-{width}.png"), full_page=True)

    asked: list[str] = []

    def answer(dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", answer)
    remove.click()
    page.wait_for_url(f"{live_server_url}/memory/")
    assert asked == [
        f"Remove the 3 notes learned from your ChatGPT import of {when}? They leave your "
        "memory for good (the activity log keeps a record); the imported conversations stay."
    ]
    message = page.locator(".messages, [role=status]", has_text="Removed 3 notes.")
    message.first.wait_for()
    box_inside_viewport(page, message.first)
    assert page.locator(".entry").count() == 2
    assert page.locator(f".writer-filter a[href='?source_import={first.pk}']").count() == 0
    page.screenshot(path=str(SCREENSHOTS / f"memory-import-removed-{width}.png"), full_page=True)
    # The activity log says who wrote each note and who removed it.
    page.goto(f"{live_server_url}/memory/log/")
    writer = page.locator(f".log td a:text-is('{label}')")
    assert writer.count() == 3  # the learning's three adds
    writer.first.scroll_into_view_if_needed()
    box_inside_viewport(page, writer.first)
    assert (
        page.locator(".log tr:has(td.change:text('Remove')) td:text-is('Memory page')").count() == 3
    )
    page.screenshot(path=str(SCREENSHOTS / f"memory-log-learned-{width}.png"), full_page=True)
    left = off_loop(lambda: sorted(MemoryEntry.objects.values_list("content", flat=True)))
    assert left == ["Drinks green tea, never coffee", "Prefers short answers"]
    assert errors == []
