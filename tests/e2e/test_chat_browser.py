"""A person logs in, chats, watches the answer stream in, and stops a second answer."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.e2e.conftest import SCREENSHOTS
from tests.factories import PASSWORD

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_login_chat_stream_and_stop_in_chromium(owner, live_server_url, llm_for_server, browser):
    llm_for_server.add_rule(
        "What is Hermes",
        reply="**Hermes Web** keeps a memory of you.\n\n```sh\nmake run\n```",
        times=1,
    )
    # Long enough (60 s at the delay below) that Stop lands mid-answer on a loaded machine.
    long_reply = " ".join(f"word{i}" for i in range(2000))
    llm_for_server.add_rule("Write a long story", reply=long_reply, times=1)

    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))

    page.goto(f"{live_server_url}/accounts/login/")
    page.fill("#id_username", owner.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server_url}/")

    page.goto(f"{live_server_url}/chat/")
    page.fill("#composer-text", "What is Hermes?")
    page.keyboard.press("Enter")
    # Streams in, then is replaced by the server's Markdown rendering: wait for that (the
    # streamed bubble renders Markdown too, and a turn still closing refuses the next one).
    page.wait_for_selector(
        '#thread[aria-busy="false"] .msg-assistant[data-status="complete"] .md strong',
        timeout=20000,
    )
    assert page.inner_text(".msg-assistant .md strong") == "Hermes Web"
    assert page.inner_text(".msg-assistant .md pre code").strip() == "make run"
    assert "/chat/" in page.url and page.url.rstrip("/") != f"{live_server_url}/chat"
    assert page.locator("#conv-list .conv").count() == 1

    llm_for_server.chunk_delay = 0.03
    page.fill("#composer-text", "Write a long story")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-streaming .streaming", timeout=20000)
    # (Polled from here: the page's CSP forbids the eval behind wait_for_function.)
    wait_for(
        lambda: len(page.inner_text(".msg-streaming .streaming")) > 40,
        timeout=20,
        what="the answer to stream",
    )
    page.click("#stop")
    page.wait_for_selector(
        '.msg-assistant[data-status="interrupted"] .msg-note >> text=Answer stopped.',
        timeout=20000,
    )
    page.wait_for_selector("#stop", state="hidden", timeout=5000)

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "chat-desktop.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(SCREENSHOTS / "chat-phone.png"), full_page=True)
    assert errors == []
