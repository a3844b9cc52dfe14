"""Nobody reaches another person's data: every URL pattern of the site, filled with the
other person's ids, answers 403/404 (anonymous: a redirect to the login), and no response
ever contains one of their marker strings. Every admin changelist and change page too, for
staff and for superusers while content access is off."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from core.privacy import registry
from core.privacy.admin_base import OwnedModelAdmin
from sessions_app.models import SystemPrompt
from tests.factories import UserFactory
from tests.privacy.conftest import Seeded, seed

#: Patterns anyone may open (no per-person data behind them).
PUBLIC = {
    "login",
    "signup",
    "healthz",
    "password_set",
    "password_reset",
    "password_reset_done",
    "api-schema",
    "logout",
    # The login page's language switch (a cookie) and the strings of the scripts: no one's data.
    "set_language",
    "javascript_catalog",
}
#: URL kwargs that name another person's row, and how to get the victim's value.
FOREIGN = {"session_id", "token_id", "user_id", "job_id", "entry_id", "name", "summary_id"}


def walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


ALL = list(walk(get_resolver().url_patterns))
SITE = [(route, p) for route, p in ALL if not route.startswith("admin/")]
ADMIN = [(route, p) for route, p in ALL if route.startswith("admin/")]


def params(pattern: URLPattern) -> list[str]:
    return list(pattern.pattern.converters)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Committed once for the module: a member (pia), a staff member (stan), a superuser
    (ruth) and the victim (quinn), whose every row carries a marker."""
    with django_db_blocker.unblock():
        pia = UserFactory(username="pia")
        stan = UserFactory(username="stan", staff=True)
        ruth = UserFactory(username="ruth", superuser=True)
        quinn = UserFactory(username="quinn")
        seed(pia, "pia")
        seed(stan, "stan")
        victim = seed(quinn, "qnn")
        victim.summary_id = quinn.search_summaries.get().pk
        yield {"pia": pia, "stan": stan, "ruth": ruth, "victim": victim}
        hashes = list(
            SystemPrompt.objects.filter(sessions__owner__in=[pia, stan, ruth, quinn]).values_list(
                "pk", flat=True
            )
        )
        get_user_model().objects.filter(pk__in=[pia.pk, stan.pk, ruth.pk, quinn.pk]).delete()
        SystemPrompt.objects.filter(pk__in=hashes).delete()


def foreign_value(name: str, victim: Seeded) -> Any:
    return {
        "session_id": victim.session.pk,
        "token_id": victim.token.pk,
        "user_id": victim.user.pk,
        "job_id": victim.job.pk,
        "entry_id": victim.entry_id,
        "name": victim.skill_name,
        "summary_id": getattr(victim, "summary_id", 1),
        "path": "references/notes.md",
        "number": 1,
        "target": "memory",
        "uidb64": "MQ",
        "token": "set-password",
    }.get(name, "1")


def missing_ids(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The same kwargs with every foreign id replaced by one that exists nowhere."""
    out: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in FOREIGN:
            out[name] = 987654321 if isinstance(value, int) else "no-such-thing-zz"
    return out


def body_of(response: Any) -> bytes:
    if getattr(response, "streaming", False):
        raw = b"".join(response.streaming_content)
    else:
        raw = response.content
    if raw[:2] == b"PK":  # a zip (exports): look inside
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            return b"\n".join(zf.read(n) for n in zf.namelist())
    return raw


def assert_no_marker(response: Any, victim: Seeded, where: str) -> None:
    body = body_of(response)
    leaked = [k for k, v in victim.markers.items() if v.encode() in body]
    assert leaked == [], f"{where} shows {leaked}"


def victim_rows(victim: Seeded) -> dict[str, int]:
    return {e.label: e.rows(victim.user).count() for e in registry.entries()}


@pytest.mark.django_db
@pytest.mark.parametrize("route,pattern", SITE, ids=[r for r, _ in SITE])
def test_another_member_gets_404_and_never_sees_a_marker(world, route, pattern):
    victim: Seeded = world["victim"]
    kwargs = {name: foreign_value(name, victim) for name in params(pattern)}
    url = reverse(pattern.name, kwargs=kwargs) if pattern.name else "/" + route
    client = Client()
    client.force_login(world["pia"])
    before = victim_rows(victim)
    foreign = FOREIGN & set(kwargs)
    get = client.get(url)
    assert get.status_code < 500, url
    assert_no_marker(get, victim, f"GET {url}")
    if foreign and pattern.name not in PUBLIC:
        # The victim's id must answer exactly like an id that does not exist: refused, and
        # no oracle (a 400 from input validation is fine only if a missing id gets it too).
        missing = reverse(pattern.name, kwargs={**kwargs, **missing_ids(kwargs)})
        data = {"title": "x", "content": "x", "pinned": "1", "post": "yes"}
        for method in ("get", "post", "delete"):
            response = (
                getattr(client, method)(url, data)
                if method == "post"
                else getattr(client, method)(url)
            )
            control = (
                getattr(client, method)(missing, data)
                if method == "post"
                else getattr(client, method)(missing)
            )
            where = f"{method.upper()} {url}"
            assert response.status_code in (400, 403, 404, 405), (
                f"{where} -> {response.status_code}"
            )
            assert response.status_code == control.status_code, f"{where} differs from a missing id"
            assert_no_marker(response, victim, where)
    assert victim_rows(victim) == before, f"{url} changed the victim's data"


@pytest.mark.django_db
@pytest.mark.parametrize("route,pattern", SITE + ADMIN, ids=[r for r, _ in SITE + ADMIN])
def test_anonymous_is_sent_to_the_login_and_sees_no_marker(world, route, pattern):
    victim: Seeded = world["victim"]
    kwargs = {name: foreign_value(name, victim) for name in params(pattern)}
    try:
        url = reverse(
            f"admin:{pattern.name}" if route.startswith("admin/") else pattern.name, kwargs=kwargs
        )
    except Exception:  # noqa: BLE001 - admin patterns without a name (catch-all)
        url = "/admin/nothing/"
    response = Client().get(url)
    assert_no_marker(response, victim, f"anonymous GET {url}")
    if pattern.name in PUBLIC:
        return
    assert response.status_code in (302, 401, 403, 404, 405), (url, response.status_code)
    if response.status_code == 302:
        assert "login" in response["Location"], (url, response["Location"])


# --- the admin ------------------------------------------------------------------------------


def owned_models() -> list[type[Model]]:
    return [m for m, a in admin.site._registry.items() if isinstance(a, OwnedModelAdmin)]


def victim_objects(model: type[Model], victim: Seeded) -> list[Model]:
    entry = registry.entry_for(model)
    if entry is None:
        return []
    return list(entry.rows(victim.user)[:3])


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["stan", "ruth"])
@pytest.mark.parametrize("model", owned_models(), ids=lambda m: m._meta.label)
def test_admin_changelists_and_pages_hide_other_peoples_content(world, who, model, settings):
    settings.HERMES_ADMIN_CONTENT_ACCESS = False
    victim: Seeded = world["victim"]
    client = Client()
    client.force_login(world[who])
    meta = model._meta
    changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
    response = client.get(changelist)
    assert response.status_code == 200, changelist
    assert_no_marker(response, victim, f"{who} {changelist}")
    search = client.get(changelist, {"q": victim.markers["user"][:8]})
    assert_no_marker(search, victim, f"{who} search {changelist}")
    for obj in victim_objects(model, victim):
        change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
        page = client.get(change, follow=True)
        assert_no_marker(page, victim, f"{who} {change}")
        if who == "stan" or registry.is_content(model):
            assert page.redirect_chain, f"{who} opened {change}"
