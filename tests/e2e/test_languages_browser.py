"""Both languages in Chromium at desktop (1366×900) and phone (390×844) sizes: every page of
the navigation and the login page, in English and in 简体中文, keep their buttons, links and
labels whole (no text cut off or spilling out of its box, nothing past the right edge) and
never scroll sideways; the scripts' own words follow the page's language."""

from __future__ import annotations

import pytest

from accounts.models import Membership, Profile
from sessions_app.models import Session
from tests.e2e.conftest import SCREENSHOTS, logged_in_page, off_loop
from tests.factories import UserFactory, conversation_with

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

VIEWPORTS = {"desktop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
PAGES = ["/", "/chat/", "/sessions/", "/memory/", "/inferences/", "/skills/", "/usage/"]
PAGES += ["/accounts/", "/accounts/team/"]

# What a person reads in a control: a box whose text is wider or taller than the box, or a
# box reaching past the right edge of the window (what the page does not scroll to).
CUT_OFF = """() => {
  const out = [];
  const seen = el => el.getClientRects().length && getComputedStyle(el).visibility !== "hidden";
  for (const el of document.querySelectorAll(
      "button, .button, input[type=submit], .mainnav a, label, .tag, th, .pill")) {
    if (!seen(el) || el.closest("[hidden], .visually-hidden")) continue;
    const box = el.getBoundingClientRect();
    const label = (el.innerText || el.value || "").trim().slice(0, 40);
    if (el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1) {
      out.push(`cut off: <${el.tagName.toLowerCase()}> "${label}" ` +
               `${el.scrollWidth}×${el.scrollHeight} in ${el.clientWidth}×${el.clientHeight}`);
    }
    if (box.right > innerWidth + 0.5) out.push(`past the edge: "${label}" right=${box.right}`);
  }
  return out;
}"""


@pytest.fixture
def ada(transactional_db):
    user = UserFactory(username="ada")
    Membership.objects.create(user=user, role="admin")
    conversation_with(user, "A question about deploying on Fridays " * 6, title="Fridays")
    return user


def _check(page, name: str, size: dict[str, int]) -> list[str]:
    problems = [f"{name}: {text}" for text in page.evaluate(CUT_OFF)]
    width = page.evaluate("document.scrollingElement.scrollWidth")
    if width > size["width"]:
        problems.append(f"{name}: scrolls sideways ({width}px)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{size['width']}x{size['height']}.png"))
    return problems


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("viewport", sorted(VIEWPORTS))
def test_every_page_keeps_its_controls_whole_in_both_languages(
    ada, live_server_url, browser, language, viewport
):
    size = VIEWPORTS[viewport]
    off_loop(lambda: Profile.objects.update_or_create(user=ada, defaults={"language": language}))
    page, errors = logged_in_page(browser, live_server_url, ada, size)
    problems = []
    for url in PAGES:
        page.goto(f"{live_server_url}{url}")
        assert page.get_attribute("html", "lang") == language
        name = url.strip("/").replace("/", "-") or "dashboard"
        problems += _check(page, f"{language}-{name}", size)
    assert problems == []
    assert errors == []


@pytest.mark.parametrize("viewport", sorted(VIEWPORTS))
def test_the_login_page_follows_the_browser_and_fits(live_server_url, browser, viewport):
    size = VIEWPORTS[viewport]
    for language, accept, sign_in in [("en", "en-GB", "Log in"), ("zh-hans", "zh-CN", "登录")]:
        context = browser.new_context(viewport=size, locale=accept)
        page = context.new_page()
        page.goto(f"{live_server_url}/accounts/login/")
        assert page.get_attribute("html", "lang") == language
        submit = page.locator("button[type=submit]:not([name=language])")
        assert submit.inner_text().strip() == sign_in
        assert _check(page, f"{language}-login", size) == []
        context.close()


def test_the_scripts_speak_the_pages_language(ada, live_server_url, browser):
    """The buttons the scripts draw (Copy on every message) come from the JavaScript
    catalog of the person's language."""
    chat = off_loop(lambda: Session.objects.get(owner=ada))
    off_loop(lambda: Profile.objects.update_or_create(user=ada, defaults={"language": "zh-hans"}))
    page, errors = logged_in_page(browser, live_server_url, ada)
    page.goto(f"{live_server_url}/chat/{chat.id}/")
    copy = page.locator("article.msg .msg-who .copy-button").first
    copy.wait_for()
    assert copy.inner_text() == "复制"
    assert copy.get_attribute("aria-label") == "复制消息"
    assert errors == []
