"""An answer left "streaming" by a process that died: the page opens "answering", resyncs,
learns the conversation is idle and shows the text kept, a note saying what happened, and
Regenerate — instead of "answering" until a reload."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.models import Message, Session
from tests.e2e.conftest import DESKTOP, PHONE, SCREENSHOTS, logged_in_page, off_loop

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_an_answer_of_a_dead_process_shows_as_interrupted_with_regenerate(
    owner, live_server_url, browser, viewport
):
    def seed() -> Session:
        session = Session.objects.create(
            owner=owner,
            title="Half an answer",
            # A turn of a process on another machine that stopped renewing its lease.
            lease_owner="turn@elsewhere:1#gone",
            lease_expires_at=timezone.now() - timedelta(seconds=1),
        )
        Message.objects.create(session=session, role="user", content="Explain the deploy")
        Message.objects.create(
            session=session,
            role="assistant",
            status="streaming",
            content="First, build the image; then push it to",
        )
        return session

    session = off_loop(seed)
    page, errors = logged_in_page(browser, live_server_url, owner, viewport)
    page.goto(f"{live_server_url}/chat/{session.pk}/")
    note = page.locator(".msg-assistant .msg-note")
    note.wait_for(timeout=20000)
    assert "server stopped while answering" in note.inner_text()
    body = page.locator(".msg-assistant .msg-body")
    assert "push it to" in body.inner_text()
    regenerate = page.locator("#regenerate")
    regenerate.wait_for(state="visible", timeout=5000)
    page.locator("#stop").wait_for(state="hidden", timeout=5000)
    box = regenerate.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    assert box["y"] + box["height"] <= viewport["height"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"chat-interrupted-{viewport['width']}.png"))
    assert off_loop(lambda: Message.objects.get(role="assistant").status) == "interrupted"
    assert errors == []
