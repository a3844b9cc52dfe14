"""What a person sees when the input is bad: a Hermes home whose state.db would compute its
messages is refused with the reason next to the import form, and a search with a date at
the end of the calendar shows the date error on the Sessions page (both used to be 500s)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import DESKTOP, PHONE, SCREENSHOTS, logged_in_page
from tests.privacy.test_import_limits import bomb_zip

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _inside_viewport(page, locator) -> None:
    box = locator.bounding_box()
    width = page.viewport_size["width"]
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_refused_import_and_bad_search_date_are_explained(
    owner, server_url, browser, viewport, tmp_path
):
    archive = tmp_path / "hermes.zip"
    archive.write_bytes(bomb_zip())
    page, errors = logged_in_page(browser, server_url, owner, viewport)

    page.goto(f"{server_url}/accounts/#import")
    page.set_input_files("#id_home", str(archive))
    page.click("form[action$='/accounts/import/'] button[type=submit]")
    refusal = page.locator(".flash-section li", has_text="state.db was refused")
    refusal.wait_for(timeout=20000)
    assert "generated column" in refusal.inner_text()
    assert page.locator(".flash-section li", has_text="Import finished with problems").count()
    refusal.scroll_into_view_if_needed()
    assert refusal.is_visible()
    _inside_viewport(page, refusal)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"import-refused-{viewport['width']}.png"))

    page.goto(f"{server_url}/sessions/?q=zebra&until=9999-12-31")
    banner = page.locator(".banner-warn[role=alert]")
    assert banner.inner_text() == "To: Use a date between 0001-01-02 and 9999-12-30."
    assert page.locator("#results-heading").count() == 0  # no search ran
    assert banner.is_visible()
    _inside_viewport(page, banner)
    page.screenshot(path=str(SCREENSHOTS / f"search-bad-date-{viewport['width']}.png"))
    assert errors == []
