"""The shared page script (static/js/ui.js) in Chromium: a dismissed confirm keeps the data,
an accepted one performs the action, and a polled export job updates the page without a
reload (search summaries are polled in tests/search/test_browser.py)."""

from __future__ import annotations

import pytest

from memory import services as memory_services
from memory.models import MemoryEntry
from privacy.models import ExportJob
from tests.conftest import wait_for
from tests.e2e.conftest import logged_in_page, off_loop

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_delete_asks_first_and_a_dismissed_question_keeps_the_entry(
    owner, live_server_url, browser
):
    off_loop(
        lambda: memory_services.memory_add(
            user=owner,
            target="memory",
            content="The build runs on Debian bookworm.",
            provenance=memory_services.Provenance(),
        )
    )
    entries = MemoryEntry.objects.filter(owner=owner)
    page, errors = logged_in_page(browser, live_server_url, owner)
    page.goto(f"{live_server_url}/memory/")
    questions: list[str] = []

    def answer(dialog, accept: bool) -> None:
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.click("form[data-confirm] button.danger")
    page.wait_for_load_state()
    assert questions == ["Delete this entry?"]
    assert off_loop(entries.count) == 1
    assert "Debian bookworm" in page.inner_text("main")

    page.once("dialog", lambda d: answer(d, True))
    with page.expect_navigation():
        page.click("form[data-confirm] button.danger")
    assert questions == ["Delete this entry?", "Delete this entry?"]
    assert off_loop(entries.count) == 0
    assert "entry deleted" in page.inner_text(".flash")
    assert errors == []


def test_export_progress_updates_without_a_reload(owner, live_server_url, browser):
    job = off_loop(
        lambda: ExportJob.objects.create(
            owner=owner, status=ExportJob.Status.RUNNING, progress=10, stage="Conversations 1/10"
        )
    )
    jobs = ExportJob.objects.filter(pk=job.pk)
    page, errors = logged_in_page(browser, live_server_url, owner)
    page.goto(f"{live_server_url}/accounts/")
    loads: list[str] = []
    page.on("load", lambda _: loads.append(page.url))
    assert page.get_attribute("#exports progress", "value") == "10"

    off_loop(lambda: jobs.update(progress=60, stage="Memory"))
    wait_for(
        lambda: page.get_attribute("#exports progress", "value") == "60",
        timeout=15,
        what="the progress bar to follow the job",
    )
    assert page.inner_text("#exports .job-stage") == "· Memory"
    assert loads == []

    # When the job ends the page reloads itself to show the outcome.
    with page.expect_event("load", timeout=15_000):
        off_loop(lambda: jobs.update(status=ExportJob.Status.FAILED, error="Disk full."))
    wait_for(
        lambda: "Disk full." in page.inner_text("#exports"),
        timeout=15,
        what="the page to show the failed job",
    )
    assert len(loads) == 1
    assert errors == []
