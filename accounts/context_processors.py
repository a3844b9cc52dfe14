from __future__ import annotations

import functools

from django.conf import settings
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext_lazy as _

from model_catalog.selectors import any_configured

from .mail import mail_enabled
from .models import Profile

# (label, url name). Sections appear in the navigation once their app provides the URL.
NAVIGATION = (
    (_("Dashboard"), "dashboard"),
    (_("Chat"), "chat"),
    (_("Sessions"), "session_list"),
    (_("Memory"), "memory_page"),
    (_("Inferences"), "inference_list"),
    (_("Skills"), "skill_list"),
    (_("Usage"), "usage"),
    (_("Account"), "account"),
    (_("Team"), "team"),
)
# Shown only to team admins (superusers and people with the "admin" role).
ADMIN_ONLY = frozenset({"team"})


def _is_team_admin(request: HttpRequest) -> bool:
    if not hasattr(request, "_hermes_team_admin"):
        from accounts.selectors import is_team_admin

        request._hermes_team_admin = is_team_admin(request.user)
    return request._hermes_team_admin


def _navigation(request: HttpRequest) -> list[dict[str, object]]:
    items = []
    for label, name in NAVIGATION:
        if name in ADMIN_ONLY and not _is_team_admin(request):
            continue
        try:
            url = reverse(name)
        except NoReverseMatch:
            continue
        active = request.path == url or (url != "/" and request.path.startswith(url))
        items.append({"label": label, "url": url, "active": active})
    # Nested sections (/accounts/ and /accounts/team/): only the closest one is current.
    current = [i for i in items if i["active"]]
    if len(current) > 1:
        closest = max(current, key=lambda i: len(str(i["url"])))
        for item in current:
            item["active"] = item is closest
    return items


def _theme(request: HttpRequest) -> str:
    if hasattr(request, "person_theme"):  # read by PersonLanguageMiddleware
        theme = request.person_theme
    else:
        theme = Profile.objects.filter(user=request.user).values_list("theme", flat=True).first()
    return theme or Profile.Theme.SYSTEM


def hermes(request: HttpRequest) -> dict[str, object]:
    authenticated = request.user.is_authenticated
    return {
        # base.html puts it on <html data-theme>; "system" follows prefers-color-scheme.
        "theme": _theme(request) if authenticated else Profile.Theme.SYSTEM,
        "theme_choices": Profile.Theme.choices,
        # A callable: only the pages with the no-model banner read the catalog, once.
        "llm_configured": functools.cache(any_configured),
        "allow_signup": settings.HERMES_ALLOW_SIGNUP and settings.HERMES_PASSWORD_LOGIN,
        "password_login": settings.HERMES_PASSWORD_LOGIN,
        # "Sign in with <name>" on the login page; empty while single sign-on is off.
        "oidc_name": settings.HERMES_OIDC_NAME if settings.HERMES_OIDC_ISSUER else "",
        "mail_enabled": mail_enabled(),
        "navigation": _navigation(request) if authenticated else [],
    }
