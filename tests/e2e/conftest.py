"""Browser tests: the real ASGI server (daphne) in a subprocess on the test database, the
scripted model over HTTP, and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from devtools.scripted_llm import ScriptedLLM
from tests.conftest import ROOT
from tests.factories import PASSWORD

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = ROOT / "var" / "screenshots"
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def llm_for_server(llm_server: ScriptedLLM) -> ScriptedLLM:
    """The shared scripted model, reset; the server subprocess reaches it over HTTP."""
    llm_server.reset()
    llm_server.chunk_delay = 0.0
    return llm_server


@pytest.fixture
def live_server_env() -> dict[str, str]:
    """Extra environment for the server under test (a module overrides it, e.g. to point
    OPENAI_BASE_URL at a closed port)."""
    return {}


@pytest.fixture
def live_server_url(transactional_db, llm_for_server, live_server_env, server_pool) -> str:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    return server_pool.url_for(
        {
            "OPENAI_BASE_URL": llm_for_server.base_url,
            "OPENAI_API_KEY": "sk-e2e",
            "HERMES_MODEL": "scripted",
            "HERMES_REVIEW_ENABLED": "false",
            "HERMES_STREAM_SAVE_INTERVAL": "0.1",
            **live_server_env,
        }
    )


@pytest.fixture
def browser() -> Iterator[object]:
    """Chromium for one test. Not shared: Playwright's sync API keeps its event loop
    running in this thread, where Django then refuses the fixtures' database calls."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


def off_loop(fn: Callable[[], Any]) -> Any:
    """Run ORM work in a plain thread: Playwright's sync API keeps an event loop in this
    one, where Django refuses synchronous database calls."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(fn())
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return result[0]


@pytest.fixture
def server_url(transactional_db, monkeypatch, request):
    """A live server that runs Celery tasks inline (no REDIS_URL), so no worker is needed."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    return request.getfixturevalue("live_server_url")


def logged_in_page(browser, live_server_url, user, viewport=DESKTOP, *, permissions=()):
    """A page logged in as ``user`` (in a context of its own, granted `permissions`) and
    the list its script errors are collected in."""
    page = browser.new_page(viewport=viewport, permissions=list(permissions))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.goto(f"{live_server_url}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server_url}/")
    return page, errors


def box_inside_viewport(page: Any, locator: Any) -> dict[str, float]:
    """The element's bounding box, asserted visible and wholly inside the viewport.

    Measured once the element shows: the chat replaces its thread with the server's
    rendering after a turn, and an element measured while it is swapped has no box."""
    box = None
    for _ in range(3):
        locator.wait_for(state="visible", timeout=10_000)
        box = locator.bounding_box()
        if box is not None:
            break
    size = page.viewport_size
    assert box is not None, "not rendered"
    assert box["x"] >= 0 and box["y"] >= 0, box
    assert box["x"] + box["width"] <= size["width"] + 0.5, (box, size)
    assert box["y"] + box["height"] <= size["height"] + 0.5, (box, size)
    return box
