"""The shared page script (static/js/ui.js) in Chromium: a dismissed confirm keeps the data,
an accepted one performs the action, and polled jobs (a data export, a search summary)
update the page without a reload."""

from __future__ import annotations

import pytest

from accounts.models import ExportJob
from memory import services as memory_services
from memory.models import MemoryEntry
from sessions_app.models import SearchSummary
from sessions_app.search.summarise import query_hash
from tests.conftest import PASSWORD, wait_for
from tests.search.conftest import make_chat

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _orm_beside_playwright(monkeypatch):  # type: ignore[no-untyped-def]
    # Playwright's sync API keeps an event loop in this thread, so Django takes the ORM
    # calls that set up and change rows mid-test for async code. They are not: nothing
    # else runs on that loop while they do.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def logged_in_page(browser, live_server_url, user):  # type: ignore[no-untyped-def]
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.goto(f"{live_server_url}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server_url}/")
    return page, errors


def test_delete_asks_first_and_a_dismissed_question_keeps_the_entry(
    owner, live_server_url, browser
):
    memory_services.memory_add(
        user=owner,
        target="memory",
        content="The build runs on Debian bookworm.",
        provenance=memory_services.Provenance(),
    )
    page, errors = logged_in_page(browser, live_server_url, owner)
    page.goto(f"{live_server_url}/memory/")
    questions: list[str] = []

    def answer(dialog, accept: bool) -> None:  # type: ignore[no-untyped-def]
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.click("form[data-confirm] button.danger")
    page.wait_for_load_state()
    assert questions == ["Delete this entry?"]
    assert MemoryEntry.objects.filter(owner=owner).count() == 1
    assert "Debian bookworm" in page.inner_text("main")

    page.once("dialog", lambda d: answer(d, True))
    with page.expect_navigation():
        page.click("form[data-confirm] button.danger")
    assert questions == ["Delete this entry?", "Delete this entry?"]
    assert MemoryEntry.objects.filter(owner=owner).count() == 0
    assert "entry deleted" in page.inner_text(".flash")
    assert errors == []


def test_export_progress_updates_without_a_reload(owner, live_server_url, browser):
    job = ExportJob.objects.create(
        owner=owner, status=ExportJob.Status.RUNNING, progress=10, stage="Conversations 1/10"
    )
    page, errors = logged_in_page(browser, live_server_url, owner)
    page.goto(f"{live_server_url}/accounts/")
    loads: list[str] = []
    page.on("load", lambda _: loads.append(page.url))
    assert page.get_attribute("#exports progress", "value") == "10"

    ExportJob.objects.filter(pk=job.pk).update(progress=60, stage="Memory")
    wait_for(
        lambda: page.get_attribute("#exports progress", "value") == "60",
        timeout=15,
        what="the progress bar to follow the job",
    )
    assert page.inner_text("#exports .export-stage") == "· Memory"
    assert loads == []

    # When the job ends the page reloads itself to show the outcome.
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.FAILED, error="Disk full.")
    wait_for(
        lambda: "Disk full." in page.inner_text("#exports"),
        timeout=15,
        what="the page to show the failed job",
    )
    assert len(loads) == 1
    assert errors == []


def test_a_pending_search_summary_appears_without_a_reload(owner, live_server_url, browser):
    chat = make_chat(owner, [("user", "Where do herons nest?")])
    row = SearchSummary.objects.create(
        owner=owner,
        session=chat,
        query="heron",
        query_hash=query_hash("heron"),
        last_message_id=chat.messages.get().id,
    )
    page, errors = logged_in_page(browser, live_server_url, owner)
    page.goto(f"{live_server_url}/sessions/?q=heron")
    loads: list[str] = []
    page.on("load", lambda _: loads.append(page.url))
    assert page.inner_text(".summary") == "Summarising…"

    SearchSummary.objects.filter(pk=row.pk).update(
        status=SearchSummary.Status.DONE, summary="They asked where herons nest."
    )
    wait_for(
        lambda: page.inner_text(".summary") == "They asked where herons nest.",
        timeout=15,
        what="the summary to replace its placeholder",
    )
    assert page.get_attribute(".summary", "data-status") == "done"
    assert loads == [] and errors == []
