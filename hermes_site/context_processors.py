from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

# (label, url name). Sections appear in the navigation once their app provides the URL.
NAVIGATION = (
    ("Dashboard", "dashboard"),
    ("Chat", "chat"),
    ("Sessions", "session_list"),
    ("Memory", "memory_page"),
    ("Inferences", "inference_list"),
    ("Skills", "skill_list"),
    ("Usage", "usage"),
    ("Account", "account"),
)


def _navigation(request: HttpRequest) -> list[dict[str, object]]:
    items = []
    for label, name in NAVIGATION:
        try:
            url = reverse(name)
        except NoReverseMatch:
            continue
        active = request.path == url or (url != "/" and request.path.startswith(url))
        items.append({"label": label, "url": url, "active": active})
    return items


def hermes(request: HttpRequest) -> dict[str, object]:
    return {
        "llm_configured": bool(settings.HERMES_MODEL),
        "allow_signup": settings.HERMES_ALLOW_SIGNUP,
        "navigation": _navigation(request) if request.user.is_authenticated else [],
    }
