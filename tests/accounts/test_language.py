"""The interface in English or 简体中文, chosen per person: the Account page's choice wins,
else the browser's (the login page's switch, else Accept-Language); and the catalog is
complete (every marked string of the code is in it), without fuzzy entries, and compiled
into the committed .mo."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.translation import gettext as _

from accounts.models import Profile
from accounts.services import profile_get

CATALOGS = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"


def _signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _settings_form(**changes: object) -> dict[str, object]:
    return {"language": "", "custom_instructions": "", "identity": "", **changes}


def test_each_person_sees_the_language_they_chose(owner, outsider):
    _signed_in(owner).post(reverse("account"), _settings_form(language="zh-hans"))
    _signed_in(outsider).post(reverse("account"), _settings_form(language="en"))
    assert profile_get(user=owner).language == "zh-hans"

    # Both browsers ask for the other language: the person's choice wins.
    chinese = _signed_in(owner).get(reverse("account"), HTTP_ACCEPT_LANGUAGE="en")
    english = _signed_in(outsider).get(reverse("account"), HTTP_ACCEPT_LANGUAGE="zh-CN")
    chinese_page, english_page = chinese.content.decode(), english.content.decode()
    assert '<html lang="zh-hans"' in chinese_page and "退出登录" in chinese_page
    assert ">记忆<" in chinese_page and "Log out" not in chinese_page
    assert '<html lang="en"' in english_page and "Log out" in english_page
    assert "退出登录" not in english_page
    assert chinese["Content-Language"] == "zh-hans" and english["Content-Language"] == "en"


def test_without_a_choice_the_browser_language_applies(owner):
    assert profile_get(user=owner).language == ""
    client = _signed_in(owner)
    assert (
        "退出登录" in client.get(reverse("account"), HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    )
    assert (
        "Log out" in client.get(reverse("account"), HTTP_ACCEPT_LANGUAGE="en-GB").content.decode()
    )
    # A language we have no catalog for falls back to English.
    assert "Log out" in client.get(reverse("account"), HTTP_ACCEPT_LANGUAGE="fr").content.decode()


def test_the_account_page_refuses_a_language_we_do_not_have(owner):
    response = _signed_in(owner).post(reverse("account"), _settings_form(language="fr"))
    assert response.status_code == 200
    assert Profile.objects.get(user=owner).language == ""


def test_the_login_page_switch_changes_the_language_before_signing_in(db):
    client = Client(enforce_csrf_checks=True)
    page = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="en")
    assert "<h1>Log in</h1>" in page.content.decode()
    assert 'action="/i18n/setlang/"' in page.content.decode()

    # Without the page's CSRF token the switch is refused.
    assert client.post(reverse("set_language"), {"language": "zh-hans"}).status_code == 403
    token = page.cookies[settings.CSRF_COOKIE_NAME].value
    switched = client.post(
        reverse("set_language"),
        {"language": "zh-hans", "next": reverse("login"), "csrfmiddlewaretoken": token},
    )
    assert switched.status_code == 302 and switched["Location"] == reverse("login")
    chinese = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "<h1>登录</h1>" in chinese and "用户名" in chinese and "Username" not in chinese


def test_the_javascript_catalog_is_a_script_of_our_own_host(db):
    response = Client().get(reverse("javascript_catalog"), HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert "script-src 'self'" in response["Content-Security-Policy"]
    page = Client().get(reverse("login")).content.decode()
    assert f'<script src="{reverse("javascript_catalog")}"></script>' in page


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU gettext is not installed")
@pytest.mark.parametrize("domain", ["django", "djangojs"])
def test_the_catalog_is_complete_and_compiled(tmp_path, domain):
    po = CATALOGS / f"{domain}.po"
    checked = subprocess.run(
        ["msgfmt", "--check", "--statistics", "-o", str(tmp_path / "compiled.mo"), str(po)],
        capture_output=True,
        text=True,
        check=True,
    )
    # msgfmt counts "N translated messages[, M fuzzy translations][, K untranslated messages]".
    assert "fuzzy" not in checked.stderr and "untranslated" not in checked.stderr, checked.stderr
    assert (tmp_path / "compiled.mo").read_bytes() == (CATALOGS / f"{domain}.mo").read_bytes(), (
        f"locale/zh_Hans/LC_MESSAGES/{domain}.mo is older than its .po: run `make messages`"
    )


@pytest.mark.skipif(shutil.which("xgettext") is None, reason="GNU gettext is not installed")
@pytest.mark.parametrize("domain", ["django", "djangojs"])
def test_every_marked_string_is_in_the_catalog(tmp_path, domain):
    """`make messages` run on a copy of the code finds nothing new to translate and nothing
    the catalog holds that the code no longer says."""
    copy = tmp_path / "src"
    skipped = shutil.ignore_patterns(".*", "var", "tests", "vendor", "__pycache__", "*.mo")
    shutil.copytree(settings.BASE_DIR, copy, ignore=skipped)
    command = [sys.executable, "manage.py", "makemessages", "-d", domain, "-l", "zh_Hans"]
    subprocess.run(
        [*command, "--no-obsolete", "--ignore=var"], cwd=copy, check=True, capture_output=True
    )
    collected = copy / "locale" / "zh_Hans" / "LC_MESSAGES" / f"{domain}.po"

    def statistics(po: Path) -> str:
        return subprocess.run(
            ["msgfmt", "--statistics", "-o", "/dev/null", str(po)],
            capture_output=True,
            text=True,
            check=True,
        ).stderr.strip()

    assert statistics(collected) == statistics(CATALOGS / f"{domain}.po"), (
        f"the code's marked strings differ from locale/zh_Hans/LC_MESSAGES/{domain}.po: "
        "run `make messages` and translate what is new"
    )


def test_mail_and_notices_speak_the_language_the_person_last_browsed_in(owner, outsider):
    from accounts.language import person_language, speaking_to

    assert person_language(owner.pk) == "en"
    _signed_in(owner).get(reverse("account"), HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert person_language(owner.pk) == "zh-hans"
    assert person_language(outsider.pk) == "en"
    with speaking_to(owner.pk):
        assert str(_("Log out")) == "退出登录"

    # Browsing again in the same language writes nothing; the Account page's choice wins.
    client = _signed_in(owner)
    with CaptureQueriesContext(connection) as queries:
        client.get(reverse("account"), HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert not [q for q in queries if "browser_language" in q["sql"] and "UPDATE" in q["sql"]]
    client.post(reverse("account"), _settings_form(language="en"))
    assert person_language(owner.pk) == "en"
